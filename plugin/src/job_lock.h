#pragma once
// A live job's hold on what it writes: its CheckpointManager's root, and the memory tier's regions
// on this host. Two live copies of one job (a restart while the first copy still runs, two
// launches of one script) would remove each other's saves in progress as leftovers of a killed
// job, commit over each other's steps and prune each other's, and overwrite each other's memory
// regions: the second copy is refused instead, naming the first.
//
// The lock is an exclusive OFD lock (core/exclusive_file_lock.h) held for the manager's lifetime:
//   - `<root>/.dcpp-job.lock`, by the leader of each group of ranks sharing the root
//     (root_sharing.h): the coordinator for a root every rank sees, each host's leader for a
//     node-local root;
//   - with a memory tier, `/dev/shm/dcpp-job.<job>.<rank>.lock`, by every rank: the regions
//     `dcpp.<job>.<rank>.*` (its slots, and the replicas it holds) are that rank's on this host,
//     whatever the root (two roots, one MemoryTierOptions::job).
// The lock is the process's, not the manager's: managers of one process on one root (the ranks of
// a test run as threads, a second manager that reads what the first saved) share it, and the last
// to end releases it. The kernel drops it when the holding process dies, however (SIGKILL, a crash,
// the OOM killer), so a restart after a crash is never refused; the lock file left behind is taken
// over. Where the file system has no such locks (some NFS and FUSE mounts) the job runs unlocked,
// with a warning once per process. A program that forks (without exec) while it holds a manager
// passes the lock on to the child too: should the program die, the child keeps it until it exits.

#include "core/exclusive_file_lock.h"

#include <filesystem>
#include <memory>
#include <string>

namespace dcpp::detail {

/// The lock file of a manager's root.
inline constexpr const char* kJobLockFileName = ".dcpp-job.lock";

class JobLock {
 public:
  /// Holds nothing.
  JobLock() = default;

  /// Locks `root`'s kJobLockFileName for this manager (or shares the lock this process holds).
  /// Throws CheckpointError: kUsage when another live process's manager holds it, naming the root,
  /// the holder (host, pid, since when) and what to do; kIo when the lock file cannot be made or
  /// locked for another reason. Holds nothing where the file system has no locks (a warning is
  /// logged once per process).
  static JobLock lock_root(const std::filesystem::path& root);

  /// Locks the memory tier's regions of `rank` of memory job `job` on this host
  /// (`/dev/shm/dcpp-job.<job>.<rank>.lock`; or shares this process's). Throws CheckpointError
  /// (kUsage) when another live process's manager holds them, naming the job, the rank, the holder
  /// and what to do; holds nothing when /dev/shm cannot be locked (the memory tier reports a
  /// /dev/shm it cannot use itself).
  static JobLock lock_memory_regions(const std::string& job, int rank);

  /// Whether this object holds (a share of) a lock.
  bool held() const { return lock_ != nullptr; }

 private:
  explicit JobLock(std::shared_ptr<const ExclusiveFileLock> lock) : lock_(std::move(lock)) {}
  // The process's lock on `path`: the one it holds, else a new one; `attempt` says how it went
  // when there was none (the lock null unless kLocked).
  static JobLock shared_lock(const std::filesystem::path& path,
                             ExclusiveFileLock::Attempt& attempt);

  std::shared_ptr<const ExclusiveFileLock> lock_;  // released by its last holder
};

/// A manager's locks: its root's (on the root's leaders) and its memory regions' (with a memory
/// tier). Released, in the manager's destructor, after everything that writes.
struct JobLocks {
  JobLock root;
  JobLock memory;
};

}  // namespace dcpp::detail
