#pragma once
// What dcpp-launch does after a job that keeps a memory tier ended badly (a rank failed, or the
// launcher was told to stop): `dcpp flush-memory` over this host's ranks, so that the newest step
// the ranks held in memory is committed on disk before their regions go.

#include <string>

namespace dcpp::tools {

struct MemoryFlushStep {
  /// The CheckpointManager's root; empty: no flush.
  std::string root;
  /// The memory tier's job name; empty: the one the manager derives from the root.
  std::string job;
};

/// Runs `dcpp flush-memory ROOT --ranks nproc [--job JOB]`, with the `dcpp` beside this program
/// (else the one in PATH), and waits for it; its output goes to this process's stdout and
/// stderr. Returns its exit status (127 when it could not be started). With several nodes
/// nothing is run (a job over several hosts is not flushed from one): says so, returns 0.
int flush_memory_tier_of_job(const MemoryFlushStep& step, int nproc, int nnodes);

}  // namespace dcpp::tools
