// A save's lock on its directory (design note in save_lock.h).

#include "save_lock.h"

#include "core/logging.h"

#include <dcpp/core/checkpoint_error.h>

#include <atomic>
#include <cstring>

namespace dcpp::detail {

namespace {

namespace fs = std::filesystem;

void warn_once_unlocked(const fs::path& path, int error) {
  static std::atomic<bool> warned{false};
  if (!warned.exchange(true)) {
    logger().warn(
        "saving without a directory lock: the file system of {} does not support open file "
        "description locks ({}); two saves into one directory at once are not refused there, so "
        "make sure only one saves into each directory at a time (this is said once per process)",
        path.string(), std::strerror(error));
  }
}

}  // namespace

SaveLock SaveLock::acquire(const fs::path& directory, const std::string& file_name,
                           const std::string& what) {
  const fs::path path = directory / file_name;
  ExclusiveFileLock::Attempt attempt = ExclusiveFileLock::try_lock(path);
  using Outcome = ExclusiveFileLock::Outcome;
  switch (attempt.outcome) {
    case Outcome::kLocked:
      return SaveLock(std::move(attempt.lock));
    case Outcome::kHeld:
      throw CheckpointError(
          ErrorKind::kUsage,
          "cannot save into " + what + ": another save is writing there (" +
              attempt.holder.describe(
                  " (this process: another thread, or an AsyncCheckpointer's save)") +
              "; lock file " + path.string() +
              "), and two saves at once would mix their files. If two process groups save "
              "into one directory (each replica of a DeviceMesh dimension's group, such as "
              "mesh.group(\"tp\"), as the checkpoint group): use one checkpoint group that "
              "covers every rank (the world), or a directory per group. If another process or "
              "thread saves there: wait for its save to end, or save elsewhere");
    case Outcome::kUnsupported:
      warn_once_unlocked(path, attempt.error);
      return SaveLock();
    case Outcome::kCannotOpen:
      throw CheckpointError(ErrorKind::kIo, "cannot save into " + what +
                                                ": cannot create its lock file " + path.string() +
                                                ": " + std::strerror(attempt.error));
    case Outcome::kCannotLock:
      throw CheckpointError(ErrorKind::kIo, "cannot save into " + what + ": cannot lock " +
                                                path.string() + ": " +
                                                std::strerror(attempt.error));
    case Outcome::kReplaced:
      break;
  }
  throw CheckpointError(ErrorKind::kIo, "cannot save into " + what + ": its lock file " +
                                            path.string() +
                                            " was replaced 64 times while this save tried to "
                                            "lock it; other saves start and end there without "
                                            "pause: give this save a directory of its own");
}

}  // namespace dcpp::detail
