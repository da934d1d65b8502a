#include "durable_file.h"

#include <dcpp/core/checkpoint_error.h>

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <system_error>

namespace dcpp::detail {
namespace fs = std::filesystem;

namespace {

[[noreturn]] void fail(const std::string& what, const fs::path& path, int error) {
  throw CheckpointError("dcpp plugin: " + what + " '" + path.string() +
                        "' failed: " + std::strerror(error) +
                        "; check that the checkpoint root is writable and has space");
}

}  // namespace

void sync_directory(const fs::path& directory) {
  const int fd = ::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) fail("opening directory", directory, errno);
  const int rc = ::fsync(fd);
  const int error = errno;
  ::close(fd);
  if (rc != 0) fail("fsync of directory", directory, error);
}

void write_file_durably(const fs::path& path, const std::string& bytes, bool sync) {
  const fs::path tmp = path.string() + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail("creating", tmp, errno);
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int error = errno;
      ::close(fd);
      fail("writing", tmp, error);
    }
    done += static_cast<size_t>(n);
  }
  if (sync && ::fsync(fd) != 0) {
    const int error = errno;
    ::close(fd);
    fail("fsync of", tmp, error);
  }
  ::close(fd);
  rename_durably(tmp, path, sync);
}

void rename_durably(const fs::path& from, const fs::path& to, bool sync) {
  if (::rename(from.c_str(), to.c_str()) != 0) {
    const int error = errno;
    throw CheckpointError("dcpp plugin: renaming '" + from.string() + "' to '" + to.string() +
                          "' failed: " + std::strerror(error));
  }
  if (sync) sync_directory(to.parent_path().empty() ? fs::path(".") : to.parent_path());
}

}  // namespace dcpp::detail
