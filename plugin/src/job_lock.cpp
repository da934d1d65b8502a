// A live job's locks on its root and its memory regions (design note in job_lock.h).

#include "job_lock.h"

#include "core/logging.h"

#include <dcpp/core/checkpoint_error.h>

#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>
#include <tuple>

namespace dcpp::detail {

namespace {

namespace fs = std::filesystem;
using Outcome = ExclusiveFileLock::Outcome;

// Only a lock this process took another way (a copy of dcpp linked twice) is refused as this
// process's: its managers share the one it holds.
const char* const kThisProcess = " (this process: a lock it did not take through this library)";

// The locks this process holds, by the lock file's directory (device, inode) and name: each one
// once, shared by the managers that use it. An entry whose lock has expired is being released by
// its last holder (unlinked, closed, then erased, under the mutex): a manager that finds one waits
// for `released` instead of finding the lock still held, by this process.
using LockKey = std::tuple<dev_t, ino_t, std::string>;
std::mutex& registry_mutex() {
  static auto* mutex = new std::mutex();
  return *mutex;
}
std::condition_variable& released() {
  static auto* condition = new std::condition_variable();
  return *condition;
}
std::map<LockKey, std::weak_ptr<const ExclusiveFileLock>>& registry() {
  static auto* locks = new std::map<LockKey, std::weak_ptr<const ExclusiveFileLock>>();
  return *locks;  // never destroyed: managers may end after static destructors ran
}

void warn_once_unlocked(const fs::path& path, int error) {
  static std::atomic<bool> warned{false};
  if (!warned.exchange(true)) {
    logger().warn(
        "running without a job lock: the file system of {} does not support open file "
        "description locks ({}); a second live copy of this job on the same root is not refused "
        "there, so make sure only one job uses each root at a time (this is said once per "
        "process)",
        path.string(), std::strerror(error));
  }
}

// Letters, digits, '-' and '_', 1 to 128 of them: MemoryTierOptions::job's rule (the memory tier
// refuses others itself).
bool is_job_name(const std::string& job) {
  return !job.empty() && job.size() <= 128 && std::all_of(job.begin(), job.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_';
  });
}

}  // namespace

JobLock JobLock::shared_lock(const fs::path& path, ExclusiveFileLock::Attempt& attempt) {
  std::unique_lock<std::mutex> guard(registry_mutex());
  struct stat directory {};
  if (::stat(path.parent_path().c_str(), &directory) != 0) {
    attempt.outcome = Outcome::kCannotOpen;
    attempt.error = errno;
    return JobLock();
  }
  const LockKey key{directory.st_dev, directory.st_ino, path.filename().string()};
  for (auto it = registry().find(key); it != registry().end(); it = registry().find(key)) {
    if (auto held = it->second.lock()) {
      attempt.outcome = Outcome::kLocked;
      return JobLock(std::move(held));
    }
    released().wait(guard);
  }
  attempt = ExclusiveFileLock::try_lock(path);
  if (attempt.outcome != Outcome::kLocked) return JobLock();
  std::shared_ptr<const ExclusiveFileLock> lock(
      new ExclusiveFileLock(std::move(attempt.lock)), [key](const ExclusiveFileLock* last) {
        std::lock_guard<std::mutex> releasing(registry_mutex());
        delete last;  // unlinks the file and drops the lock
        registry().erase(key);
        released().notify_all();
      });
  registry().emplace(key, lock);
  return JobLock(std::move(lock));
}

JobLock JobLock::lock_root(const fs::path& root) {
  const fs::path path = root / kJobLockFileName;
  ExclusiveFileLock::Attempt attempt;
  JobLock lock = shared_lock(path, attempt);
  switch (attempt.outcome) {
    case Outcome::kLocked:
      return lock;
    case Outcome::kHeld:
      throw CheckpointError(
          ErrorKind::kUsage,
          "checkpoint root '" + root.string() + "' is in use by another live job: its " +
              "CheckpointManager (" + attempt.holder.describe(kThisProcess) +
              ") holds the lock file " + path.string() +
              ". Two jobs on one root would remove each other's saves in progress and commit "
              "and prune over each other's steps. Stop the other job (or wait for it to end), "
              "or give this one another root (CheckpointManagerOptions::root)");
    case Outcome::kUnsupported:
      warn_once_unlocked(path, attempt.error);
      return JobLock();
    case Outcome::kCannotOpen:
      throw CheckpointError(ErrorKind::kIo, "cannot create the job lock file " + path.string() +
                                                ": " + std::strerror(attempt.error));
    case Outcome::kCannotLock:
      throw CheckpointError(ErrorKind::kIo, "cannot lock the job lock file " + path.string() +
                                                ": " + std::strerror(attempt.error));
    case Outcome::kReplaced:
      break;
  }
  throw CheckpointError(ErrorKind::kIo,
                        "the job lock file " + path.string() +
                            " was replaced 64 times while this manager tried to lock it: "
                            "managers start and end on this root without pause; give this job a "
                            "root of its own");
}

JobLock JobLock::lock_memory_regions(const std::string& job, int rank) {
  if (!is_job_name(job)) return JobLock();
  const fs::path path =
      fs::path("/dev/shm") / ("dcpp-job." + job + "." + std::to_string(rank) + ".lock");
  ExclusiveFileLock::Attempt attempt;
  JobLock lock = shared_lock(path, attempt);
  if (attempt.outcome == Outcome::kLocked) return lock;
  if (attempt.outcome == Outcome::kHeld) {
    throw CheckpointError(
        ErrorKind::kUsage,
        "the memory tier '" + job + "' of rank " + std::to_string(rank) +
            " is in use on this host by another live job: its CheckpointManager (" +
            attempt.holder.describe(kThisProcess) + ") holds the lock file " + path.string() +
            ". Two jobs with one MemoryTierOptions::job would overwrite each other's regions "
            "(/dev/shm/dcpp." +
            job + "." + std::to_string(rank) +
            ".*). Stop the other job (or wait for it to end), or give this one another "
            "MemoryTierOptions::job");
  }
  if (attempt.outcome == Outcome::kUnsupported) warn_once_unlocked(path, attempt.error);
  logger().debug("memory tier '{}' of rank {} runs without a job lock: cannot lock {} ({})", job,
                 rank, path.string(), std::strerror(attempt.error));
  return JobLock();
}

}  // namespace dcpp::detail
