#pragma once
// The memory tier's newest step written to disk from outside the job (docs/plugin.md, "Memory
// tier"): what `dcpp-launch --memory-job` does on its host once the job's ranks died or were
// stopped, and `dcpp flush-memory` by hand (a Slurm epilog, an operator draining a host), so that
// a job started again from scratch still resumes from the newest step.

#include <dcpp/core/export.h>
#include <dcpp/plugin/checkpoint_info.h>

#include <filesystem>
#include <optional>
#include <string>

namespace dcpp {

struct DCPP_API MemoryFlushOptions {
  /// The CheckpointManager's root, where the step is committed as `step-XXXXXXXX/`.
  std::filesystem::path root;
  /// The memory tier's job name (MemoryTierOptions::job, or what the manager derived from the
  /// root: empty here derives it the same way).
  std::string job;
  /// The job's ranks, 0 .. ranks - 1 (its world size). A rank's step is taken from its own slots
  /// or from a replica another rank keeps (MemoryTierOptions::replicas) on this host: a job over
  /// several hosts is flushed from one that holds a copy of every rank's step.
  int ranks = 1;
  /// Leave the regions in place afterwards (default: removed once the step is on disk, or when
  /// the disk holds a step as new).
  bool keep_regions = false;
  /// fsync the files and directories written (off for tests only).
  bool sync_files = true;

  MemoryFlushOptions& with_root(std::filesystem::path value) {
    root = std::move(value);
    return *this;
  }
  MemoryFlushOptions& with_job(std::string value) {
    job = std::move(value);
    return *this;
  }
  MemoryFlushOptions& with_ranks(int value) {
    ranks = value;
    return *this;
  }
  MemoryFlushOptions& with_keep_regions(bool value) {
    keep_regions = value;
    return *this;
  }
  MemoryFlushOptions& with_sync_files(bool value) {
    sync_files = value;
    return *this;
  }
};

/// What flush_memory_tier did.
struct DCPP_API MemoryFlushResult {
  /// The step it committed under the root, if it wrote one.
  std::optional<CheckpointInfo> written;
  /// One line for a log: what was written, or why nothing was.
  std::string message;
};

/// Takes the newest step of which this host holds every rank of `options.job`'s copy complete in
/// memory (its own slots or a replica; its CRC checked, one save, saved by a job of
/// `options.ranks` ranks) and, when it is newer than the
/// root's newest complete step, commits it there as the manager commits a step (DCP's files, the
/// merged `.metadata`, the step's own manifest, the rename), so that a restore finds it; then
/// removes the job's regions on this host (unless keep_regions). Nothing to write (no common step,
/// the disk as new) is no error: the result says why. Throws CheckpointError for bad options, a job
/// of another world size (naming it), or a write that failed (the root's steps untouched: the write
/// goes to an `.incomplete` directory first). Not for a job that is running: its ranks write the
/// slots.
DCPP_API MemoryFlushResult flush_memory_tier(const MemoryFlushOptions& options);

}  // namespace dcpp
