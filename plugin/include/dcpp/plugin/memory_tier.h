#pragma once
// The CheckpointManager's memory tier (docs/plugin.md, "Memory tier"): each rank's newest steps
// kept in two POSIX shared-memory regions of its own, `/dcpp.<job>.<rank>.<0|1>` (files in
// /dev/shm), which outlive the rank's process. A rank killed (SIGKILL, a crash, the OOM killer)
// and restarted on its host resumes from there: restore() prefers the newest step every rank holds
// in memory over the disk and remote tiers. Host memory: two slots of a rank's state per rank.

#include <dcpp/core/export.h>

#include <cstdint>
#include <string>

namespace dcpp {

struct DCPP_API MemoryTierOptions {
  /// Keep every N-th step in memory (1: every step); 0: no memory tier.
  int64_t every_steps = 0;
  /// The job's part of the regions' names: 1 to 128 letters, digits, '-' or '_'. Empty: derived
  /// from the manager's root (its absolute path, hashed), so that a job restarted on the same
  /// root finds its regions and two jobs on two roots never share them.
  std::string job;
  /// The most bytes a rank's step may take in its slot (its tensors' bytes, plus its values and
  /// metadata); 0: no cap. With a cap the manager checks, when made, that /dev/shm has room for
  /// two slots of it for each rank of the host (LOCAL_WORLD_SIZE ranks, else 1), counting what
  /// this job's regions hold already, and fails on every rank, naming the sizes, when it does
  /// not; a step larger than the cap is refused. Without one, a step that does not fit in
  /// /dev/shm fails when written (the pages are reserved first), never with SIGBUS.
  int64_t max_bytes_per_rank = 0;
  /// Threads that copy a step into its slot (the training thread included).
  int copy_threads = 2;

  MemoryTierOptions& with_every_steps(int64_t value) {
    every_steps = value;
    return *this;
  }
  MemoryTierOptions& with_job(std::string value) {
    job = std::move(value);
    return *this;
  }
  MemoryTierOptions& with_max_bytes_per_rank(int64_t value) {
    max_bytes_per_rank = value;
    return *this;
  }
  MemoryTierOptions& with_copy_threads(int value) {
    copy_threads = value;
    return *this;
  }
};

}  // namespace dcpp
