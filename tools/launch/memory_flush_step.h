#pragma once
// What dcpp-launch does after a job that keeps a memory tier ended badly (a rank failed, or the
// launcher was told to stop): `dcpp flush-memory` over the job's ranks on the first node, so that
// the newest step the ranks held in memory is committed on disk before their regions go.

#include <string>

namespace dcpp::tools {

struct MemoryFlushStep {
  /// The CheckpointManager's root; empty: no flush.
  std::string root;
  /// The memory tier's job name; empty: the one the manager derives from the root.
  std::string job;
};

/// On node 0, runs `dcpp flush-memory ROOT --ranks nproc*nnodes [--job JOB]`, with the `dcpp`
/// beside this program (else the one in PATH), and waits for it; its output goes to this
/// process's stdout and stderr. Returns its exit status (127 when it could not be started). A job
/// over several hosts is written from node 0's host when it holds every rank's step (its own
/// ranks' slots and the replicas it keeps, MemoryTierOptions::replicas); the other nodes run
/// nothing (say so, return 0): they would write the same step to the same root at once.
int flush_memory_tier_of_job(const MemoryFlushStep& step, int nproc, int nnodes, int node_rank);

}  // namespace dcpp::tools
