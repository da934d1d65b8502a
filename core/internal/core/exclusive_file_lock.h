#pragma once
// A process's exclusive hold on a path: an open-file-description lock (fcntl F_OFD_SETLK, Linux
// 3.15+) on a lock file, with "<host> <pid> <unix seconds>" written in it for the messages of
// those it refuses. The one definition of the protocol, shared by a save's lock on its directory
// (storage's save_lock.h) and a CheckpointManager's lock on its root (plugin's job_lock.h)
// through dcpp_core_internals.
//
// The kernel drops the lock with the last descriptor of its open file description, so a holder
// that dies (SIGKILL, a crash, a power loss) never blocks the next one; the file it leaves behind
// is taken over. Unlike a POSIX record lock (F_SETLK), two descriptions in one process conflict
// too: two threads (two objects) of one process exclude each other.
//
// Acquire: open (O_CREAT, no truncation, close-on-exec), lock without waiting, then check that the
// path still names the locked file (fstat against stat: the previous holder may have unlinked it
// between our open and our lock) and retry if not; then write the holder into it. Release: unlink
// the file while still holding it, then close.
//
// Limits: a child forked (without exec) while the lock is held shares the open file description:
// should the holder die without releasing, the child keeps the lock until it exits. Locks on a
// network file system hold between machines only where it forwards them (NFSv4 does, lockd for
// v3); some (some NFS and FUSE mounts, old kernels) have none at all (Outcome::kUnsupported).

#include <filesystem>
#include <string>

namespace dcpp::detail {

/// Who holds a lock, from its lock file's text (written by another process: read as untrusted).
struct LockHolder {
  std::string host;  // printable ASCII only
  long long pid = 0;
  long long since = 0;  // unix seconds
  /// Whether the holder wrote its name (a holder between its lock and its write has not).
  bool known() const { return pid > 0 && since > 0; }
  /// Whether it is this process (this host, this pid).
  bool is_this_process() const;
  /// "pid P on host H<this_process_note>, since 2024-05-01 12:00:00 UTC (42 s ago)"; the note
  /// (" (this process: ...)", say) only when is_this_process(); "a holder that has not written its
  /// name yet" when !known().
  std::string describe(const std::string& this_process_note = "") const;
};

class ExclusiveFileLock {
 public:
  enum class Outcome {
    kLocked,       // `lock` holds the file
    kHeld,         // another open file description holds it: `holder` says whose
    kUnsupported,  // the file system has no such locks (`error`: ENOLCK, EINVAL, ENOSYS,
                   // EOPNOTSUPP); the lock file was removed again
    kCannotOpen,   // the lock file cannot be opened or created (`error`)
    kCannotLock,   // fcntl failed otherwise (`error`)
    kReplaced,     // the path named another file after each of 64 locks: holders come and go
                   // without pause
  };
  struct Attempt;

  /// Tries once, without waiting, to lock `path` (see the design note above). Never throws
  /// except std::bad_alloc; the caller words the refusal.
  static Attempt try_lock(const std::filesystem::path& path);

  /// Holds nothing.
  ExclusiveFileLock() = default;
  ExclusiveFileLock(ExclusiveFileLock&& other) noexcept;
  ExclusiveFileLock& operator=(ExclusiveFileLock&& other) noexcept;
  ExclusiveFileLock(const ExclusiveFileLock&) = delete;
  ExclusiveFileLock& operator=(const ExclusiveFileLock&) = delete;
  /// Releases.
  ~ExclusiveFileLock();

  /// Whether this object holds a lock.
  bool held() const { return fd_ >= 0; }
  const std::filesystem::path& path() const { return path_; }
  /// Unlinks the lock file (while still holding it), then closes it, which drops the lock. Never
  /// throws: a file that cannot be unlinked is logged (the next holder takes it over).
  void release() noexcept;

 private:
  ExclusiveFileLock(int fd, std::filesystem::path path) : fd_(fd), path_(std::move(path)) {}

  int fd_ = -1;
  std::filesystem::path path_;
};

struct ExclusiveFileLock::Attempt {
  Outcome outcome = Outcome::kCannotLock;
  ExclusiveFileLock lock;  // held when outcome is kLocked
  LockHolder holder;       // kHeld
  int error = 0;           // errno: kUnsupported, kCannotOpen, kCannotLock
};

}  // namespace dcpp::detail
