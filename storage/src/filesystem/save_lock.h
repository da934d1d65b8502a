#pragma once
// A save's hold on its directory: an open-file-description lock on a lock file in the directory
// (core/exclusive_file_lock.h: the protocol, what the kernel drops when the holder dies, the
// limits), taken before the save writes any file there and given up when it ends. Two threads
// (two AsyncCheckpointers) of one process exclude each other too. Where the file system has no
// such locks a warning is logged once per process and the save proceeds unlocked. Only the
// directory drivers lock: an S3 prefix or a memory-tier step has no such lock.

#include "core/exclusive_file_lock.h"

#include <filesystem>
#include <string>

namespace dcpp::detail {

class SaveLock {
 public:
  /// Holds nothing.
  SaveLock() = default;
  /// Locks `directory / file_name` for a save, or throws CheckpointError: kUsage when another save
  /// holds it, naming the directory, the holder (host, pid, since when) and the likely cause and
  /// fix; kIo when the lock file cannot be made or locked for another reason. `what` names what is
  /// saved, for the message ("directory ...", "rank 3's part of directory ..."). Returns a lock
  /// that holds nothing where the file system has no locks.
  static SaveLock acquire(const std::filesystem::path& directory, const std::string& file_name,
                          const std::string& what);

  SaveLock(SaveLock&& other) noexcept = default;
  SaveLock& operator=(SaveLock&& other) noexcept = default;
  SaveLock(const SaveLock&) = delete;
  SaveLock& operator=(const SaveLock&) = delete;
  /// Releases.
  ~SaveLock() = default;

  /// Whether this object holds a lock.
  bool held() const { return lock_.held(); }
  /// Unlinks the lock file (while still holding it), then closes it, which drops the lock. Never
  /// throws: a file that cannot be unlinked is logged (the next save takes it over).
  void release() noexcept { lock_.release(); }

 private:
  explicit SaveLock(ExclusiveFileLock lock) : lock_(std::move(lock)) {}

  ExclusiveFileLock lock_;
};

}  // namespace dcpp::detail
