// A save's lock on its directory (design note in save_lock.h).

#include "save_lock.h"

#include "core/logging.h"

#include <dcpp/core/checkpoint_error.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <sstream>

namespace dcpp::detail {

namespace {

namespace fs = std::filesystem;

std::string host_name() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0') return "unknown-host";
  return name;
}

// What a holder writes into its lock file: "<host> <pid> <unix seconds>".
std::string holder_text() {
  return host_name() + " " + std::to_string(getpid()) + " " +
         std::to_string(static_cast<long long>(std::time(nullptr))) + "\n";
}

// The holder, as the refused save's message names it, from the lock file's text (written by
// another process: read as untrusted, up to 256 bytes, and only if it has the expected form).
std::string describe_holder(int fd) {
  char buffer[257] = {};
  const ssize_t got = pread(fd, buffer, sizeof(buffer) - 1, 0);
  std::istringstream fields(std::string(buffer, got > 0 ? static_cast<std::size_t>(got) : 0));
  std::string host;
  long long pid = 0, since = 0;
  if (!(fields >> host >> pid >> since) || pid <= 0 || since <= 0) {
    return "a holder that has not written its name yet";
  }
  for (char& c : host) {
    if (c < 0x21 || c > 0x7e) c = '?';
  }
  std::string text = "pid " + std::to_string(pid) + " on host " + host;
  if (host == host_name() && pid == getpid()) {
    text += " (this process: another thread, or an AsyncCheckpointer's save)";
  }
  const std::time_t when = static_cast<std::time_t>(since);
  std::tm utc{};
  char stamp[64] = {};
  if (gmtime_r(&when, &utc) != nullptr &&
      std::strftime(stamp, sizeof(stamp), "%Y-%m-%d %H:%M:%S UTC", &utc) > 0) {
    text += ", since " + std::string(stamp);
    const long long age = static_cast<long long>(std::time(nullptr)) - since;
    if (age >= 0) text += " (" + std::to_string(age) + " s ago)";
  }
  return text;
}

bool locks_unsupported(int error) {
  return error == ENOLCK || error == EINVAL || error == ENOSYS || error == EOPNOTSUPP;
}

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

struct flock whole_file_write_lock() {
  struct flock lock {};
  lock.l_type = F_WRLCK;
  lock.l_whence = SEEK_SET;
  lock.l_start = 0;
  lock.l_len = 0;  // the whole file
  lock.l_pid = 0;  // required by F_OFD_SETLK
  return lock;
}

}  // namespace

SaveLock SaveLock::acquire(const fs::path& directory, const std::string& file_name,
                           const std::string& what) {
  const fs::path path = directory / file_name;
  // A holder that unlinks the file between our open and our lock makes us lock a file the path no
  // longer names: retry with the path's new file. Each retry needs another save to have ended
  // meanwhile, so a few suffice unless saves end and start without pause.
  for (int attempt = 0; attempt < 64; ++attempt) {
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
      const int error = errno;
      throw CheckpointError(ErrorKind::kIo, "cannot save into " + what +
                                                ": cannot create its lock file " + path.string() +
                                                ": " + std::strerror(error));
    }
    struct flock lock = whole_file_write_lock();
    if (fcntl(fd, F_OFD_SETLK, &lock) != 0) {
      const int error = errno;
      if (error == EAGAIN || error == EACCES) {
        const std::string holder = describe_holder(fd);
        ::close(fd);
        throw CheckpointError(
            ErrorKind::kUsage,
            "cannot save into " + what + ": another save is writing there (" + holder +
                "; lock file " + path.string() +
                "), and two saves at once would mix their files. If two process groups save "
                "into one directory (each replica of a DeviceMesh dimension's group, such as "
                "mesh.group(\"tp\"), as the checkpoint group): use one checkpoint group that "
                "covers every rank (the world), or a directory per group. If another process or "
                "thread saves there: wait for its save to end, or save elsewhere");
      }
      ::close(fd);
      if (locks_unsupported(error)) {
        warn_once_unlocked(path, error);
        std::error_code ignored;
        fs::remove(path, ignored);
        return SaveLock();
      }
      throw CheckpointError(ErrorKind::kIo, "cannot save into " + what + ": cannot lock " +
                                                path.string() + ": " + std::strerror(error));
    }
    struct stat locked {};
    struct stat named {};
    if (fstat(fd, &locked) != 0 || ::stat(path.c_str(), &named) != 0 ||
        locked.st_dev != named.st_dev || locked.st_ino != named.st_ino) {
      ::close(fd);  // a file its holder unlinked: take the path's new one
      continue;
    }
    // Who holds it, for the messages of the saves it refuses; they do without when this fails.
    const std::string text = holder_text();
    if (ftruncate(fd, 0) != 0 ||
        pwrite(fd, text.data(), text.size(), 0) != static_cast<ssize_t>(text.size())) {
      logger().debug("cannot write the holder into {}: {}", path.string(), std::strerror(errno));
    }
    return SaveLock(fd, path);
  }
  throw CheckpointError(ErrorKind::kIo, "cannot save into " + what + ": its lock file " +
                                            path.string() +
                                            " was replaced 64 times while this save tried to "
                                            "lock it; other saves start and end there without "
                                            "pause: give this save a directory of its own");
}

SaveLock::SaveLock(SaveLock&& other) noexcept : fd_(other.fd_), path_(std::move(other.path_)) {
  other.fd_ = -1;
}

SaveLock& SaveLock::operator=(SaveLock&& other) noexcept {
  if (this != &other) {
    release();
    fd_ = other.fd_;
    path_ = std::move(other.path_);
    other.fd_ = -1;
  }
  return *this;
}

SaveLock::~SaveLock() { release(); }

void SaveLock::release() noexcept {
  if (fd_ < 0) return;
  // Unlinked while held: a save that opened this file meanwhile finds, once it has the lock, that
  // the path no longer names it, and retries with a new one.
  if (::unlink(path_.c_str()) != 0 && errno != ENOENT) {
    try {
      logger().warn("cannot remove the save lock file {}: {} (the next save takes it over)",
                    path_.string(), std::strerror(errno));
    } catch (...) {
    }
  }
  ::close(fd_);
  fd_ = -1;
}

}  // namespace dcpp::detail
