#pragma once
// A save's hold on its directory: an open-file-description lock (fcntl F_OFD_SETLK, Linux 3.15+)
// on a lock file in the directory, taken before the save writes any file there and given up when
// it ends. The kernel drops the lock with the last descriptor of its open file description, so a
// holder that dies (SIGKILL, a crash, a power loss) never blocks the next save; a file it leaves
// behind is taken over. Unlike a POSIX record lock (F_SETLK), two descriptions in one process
// conflict too, so two threads (two AsyncCheckpointers) of one process exclude each other.
//
// Acquire: open (O_CREAT, no truncation), lock without waiting, then check that the path still
// names the locked file (fstat against stat: the previous holder may have unlinked it between our
// open and our lock) and retry if not; then write "<host> <pid> <unix seconds>" into it, read only
// for the messages of refused saves. Release: unlink the file while still holding it, then close.
// Where the file system has no such locks (ENOLCK, EINVAL, ENOSYS, EOPNOTSUPP: some NFS and FUSE
// mounts, old kernels) a warning is logged once per process and the save proceeds unlocked.
//
// Limits: a child forked (without exec) while the lock is held shares the open file description:
// should the holder die without releasing, the child keeps the lock until it exits. Locks on a
// network file system hold between machines only where it forwards them (NFSv4 does, lockd for
// v3). Only the directory drivers lock: an S3 prefix or a memory-tier step has no such lock.

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

  SaveLock(SaveLock&& other) noexcept;
  SaveLock& operator=(SaveLock&& other) noexcept;
  SaveLock(const SaveLock&) = delete;
  SaveLock& operator=(const SaveLock&) = delete;
  /// Releases.
  ~SaveLock();

  /// Whether this object holds a lock.
  bool held() const { return fd_ >= 0; }
  /// Unlinks the lock file (while still holding it), then closes it, which drops the lock. Never
  /// throws: a file that cannot be unlinked is logged (the next save takes it over).
  void release() noexcept;

 private:
  SaveLock(int fd, std::filesystem::path path) : fd_(fd), path_(std::move(path)) {}

  int fd_ = -1;
  std::filesystem::path path_;
};

}  // namespace dcpp::detail
