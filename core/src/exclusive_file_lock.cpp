// An exclusive hold on a path through an OFD lock (design note in exclusive_file_lock.h).

#include "core/exclusive_file_lock.h"

#include "core/logging.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

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

// The holder named in the lock file `fd` (up to 256 bytes, and only if it has the expected form).
LockHolder read_holder(int fd) {
  char buffer[257] = {};
  const ssize_t got = pread(fd, buffer, sizeof(buffer) - 1, 0);
  std::istringstream fields(std::string(buffer, got > 0 ? static_cast<std::size_t>(got) : 0));
  LockHolder holder;
  if (!(fields >> holder.host >> holder.pid >> holder.since) || holder.pid <= 0 ||
      holder.since <= 0) {
    return LockHolder{};
  }
  for (char& c : holder.host) {
    if (c < 0x21 || c > 0x7e) c = '?';
  }
  return holder;
}

bool locks_unsupported(int error) {
  return error == ENOLCK || error == EINVAL || error == ENOSYS || error == EOPNOTSUPP;
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

bool LockHolder::is_this_process() const {
  return known() && pid == getpid() && host == host_name();
}

std::string LockHolder::describe(const std::string& this_process_note) const {
  if (!known()) return "a holder that has not written its name yet";
  std::string text = "pid " + std::to_string(pid) + " on host " + host;
  if (is_this_process()) text += this_process_note;
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

ExclusiveFileLock::Attempt ExclusiveFileLock::try_lock(const fs::path& path) {
  Attempt attempt;
  // A holder that unlinks the file between our open and our lock makes us lock a file the path no
  // longer names: retry with the path's new file. Each retry needs another holder to have ended
  // meanwhile, so a few suffice unless holders end and start without pause.
  for (int tries = 0; tries < 64; ++tries) {
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
      attempt.outcome = Outcome::kCannotOpen;
      attempt.error = errno;
      return attempt;
    }
    struct flock lock = whole_file_write_lock();
    if (fcntl(fd, F_OFD_SETLK, &lock) != 0) {
      attempt.error = errno;
      if (attempt.error == EAGAIN || attempt.error == EACCES) {
        attempt.outcome = Outcome::kHeld;
        attempt.holder = read_holder(fd);
        ::close(fd);
        return attempt;
      }
      ::close(fd);
      if (locks_unsupported(attempt.error)) {
        attempt.outcome = Outcome::kUnsupported;
        std::error_code ignored;
        fs::remove(path, ignored);
        return attempt;
      }
      attempt.outcome = Outcome::kCannotLock;
      return attempt;
    }
    struct stat locked {};
    struct stat named {};
    if (fstat(fd, &locked) != 0 || ::stat(path.c_str(), &named) != 0 ||
        locked.st_dev != named.st_dev || locked.st_ino != named.st_ino) {
      ::close(fd);  // a file its holder unlinked: take the path's new one
      continue;
    }
    // Who holds it, for the messages of those it refuses; they do without when this fails.
    const std::string text = holder_text();
    if (ftruncate(fd, 0) != 0 ||
        pwrite(fd, text.data(), text.size(), 0) != static_cast<ssize_t>(text.size())) {
      logger().debug("cannot write the holder into {}: {}", path.string(), std::strerror(errno));
    }
    attempt.outcome = Outcome::kLocked;
    attempt.error = 0;
    attempt.lock = ExclusiveFileLock(fd, path);
    return attempt;
  }
  attempt.outcome = Outcome::kReplaced;
  attempt.error = 0;
  return attempt;
}

ExclusiveFileLock::ExclusiveFileLock(ExclusiveFileLock&& other) noexcept
    : fd_(other.fd_), path_(std::move(other.path_)) {
  other.fd_ = -1;
}

ExclusiveFileLock& ExclusiveFileLock::operator=(ExclusiveFileLock&& other) noexcept {
  if (this != &other) {
    release();
    fd_ = other.fd_;
    path_ = std::move(other.path_);
    other.fd_ = -1;
  }
  return *this;
}

ExclusiveFileLock::~ExclusiveFileLock() { release(); }

void ExclusiveFileLock::release() noexcept {
  if (fd_ < 0) return;
  // Unlinked while held: one that opened this file meanwhile finds, once it has the lock, that
  // the path no longer names it, and retries with a new one.
  if (::unlink(path_.c_str()) != 0 && errno != ENOENT) {
    try {
      logger().warn("cannot remove the lock file {}: {} (the next holder takes it over)",
                    path_.string(), std::strerror(errno));
    } catch (...) {
    }
  }
  ::close(fd_);
  fd_ = -1;
}

}  // namespace dcpp::detail
