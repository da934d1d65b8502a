#include "core/durable_file.h"

#include <dcpp/core/checkpoint_error.h>

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace dcpp::detail {
namespace fs = std::filesystem;

namespace {

/// "cannot <what> <path>: <strerror>", with what to do for the errors a user can act on.
[[noreturn]] void fail(const std::string& what, const fs::path& path, int error) {
  std::string hint;
  if (error == ENOSPC || error == EDQUOT) {
    hint = "; free some space or save elsewhere";
  } else if (error == EACCES || error == EPERM || error == EROFS) {
    hint = "; check the permissions of the checkpoint directory";
  }
  throw CheckpointError(
      ErrorKind::kIo, "cannot " + what + " " + path.string() + ": " + std::strerror(error) + hint);
}

}  // namespace

void sync_directory(const fs::path& directory) {
  const int fd = ::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) fail("open directory", directory, errno);
  const int rc = ::fsync(fd);
  const int error = errno;
  ::close(fd);
  if (rc != 0) fail("fsync directory", directory, error);
}

void write_file_durably(const fs::path& path, const std::string& bytes, bool sync) {
  const fs::path tmp = path.string() + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail("create", tmp, errno);
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int error = errno;
      ::close(fd);
      fail("write to", tmp, error);
    }
    done += static_cast<size_t>(n);
  }
  if (sync && ::fsync(fd) != 0) {
    const int error = errno;
    ::close(fd);
    fail("fsync", tmp, error);
  }
  ::close(fd);
  rename_durably(tmp, path, sync);
}

void rename_durably(const fs::path& from, const fs::path& to, bool sync) {
  if (::rename(from.c_str(), to.c_str()) != 0) {
    const int error = errno;
    throw CheckpointError(ErrorKind::kIo, "cannot rename " + from.string() + " to " + to.string() +
                                              ": " + std::strerror(error));
  }
  if (sync) sync_directory(to.parent_path().empty() ? fs::path(".") : to.parent_path());
}

}  // namespace dcpp::detail
