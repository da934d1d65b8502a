#include "format/file_io.h"

#include <dcpp/core/checkpoint_error.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace dcpp::detail {

namespace {

[[noreturn]] void throw_errno(const std::string& what, const std::filesystem::path& path) {
  const int error = errno;
  std::string hint;
  if (error == ENOSPC || error == EDQUOT) {
    hint = "; free some space or save elsewhere";
  } else if (error == EACCES || error == EPERM || error == EROFS) {
    hint = "; check the permissions of the checkpoint directory";
  } else if (error == ENOENT) {
    hint = "; the checkpoint is incomplete or the path is wrong";
  }
  // A file or directory that is not there is a checkpoint not found; any other refusal, I/O.
  const ErrorKind kind =
      error == ENOENT || error == ENOTDIR ? ErrorKind::kNotFound : ErrorKind::kIo;
  throw CheckpointError(
      kind, "cannot " + what + " " + path.string() + ": " + std::strerror(error) + hint);
}

}  // namespace

File::File(const std::filesystem::path& path, Mode mode) : path_(path) {
  const int flags = mode == Mode::kRead        ? O_RDONLY
                    : mode == Mode::kReadWrite ? O_RDWR
                                               : (O_WRONLY | O_CREAT | O_TRUNC);
  fd_ = ::open(path.c_str(), flags | O_CLOEXEC, 0644);
  if (fd_ < 0) {
    throw_errno(mode == Mode::kCreateTruncate ? "create" : "open", path);
  }
}

File::~File() {
  if (fd_ >= 0) {
    ::close(fd_);
  }
}

uint64_t File::size() const {
  struct stat st {};
  if (::fstat(fd_, &st) != 0) {
    throw_errno("stat", path_);
  }
  return static_cast<uint64_t>(st.st_size);
}

void File::write_all(const void* data, std::size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t written = ::write(fd_, p, std::min<std::size_t>(n, 1u << 30));
    if (written < 0) {
      if (errno == EINTR) {
        continue;
      }
      throw_errno("write to", path_);
    }
    p += written;
    n -= static_cast<std::size_t>(written);
  }
}

void File::read_exactly(uint64_t offset, void* dst, std::size_t n) const {
  if (read_counter_ != nullptr) {
    *read_counter_ += n;
  }
  char* p = static_cast<char*>(dst);
  while (n > 0) {
    const ssize_t got =
        ::pread(fd_, p, std::min<std::size_t>(n, 1u << 30), static_cast<off_t>(offset));
    if (got < 0) {
      if (errno == EINTR) {
        continue;
      }
      throw_errno("read", path_);
    }
    if (got == 0) {
      throw CheckpointError(ErrorKind::kCorrupt,
                            "data file " + path_.string() + " is truncated: it ends before byte " +
                                std::to_string(offset + 1) +
                                "; the checkpoint is damaged, load an earlier one");
    }
    p += got;
    offset += static_cast<uint64_t>(got);
    n -= static_cast<std::size_t>(got);
  }
}

void File::write_at(uint64_t offset, const void* data, std::size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t written =
        ::pwrite(fd_, p, std::min<std::size_t>(n, 1u << 30), static_cast<off_t>(offset));
    if (written < 0) {
      if (errno == EINTR) {
        continue;
      }
      throw_errno("write to", path_);
    }
    p += written;
    offset += static_cast<uint64_t>(written);
    n -= static_cast<std::size_t>(written);
  }
}

void File::allocate(uint64_t size) {
  if (size > 0) {
    const int error = ::posix_fallocate(fd_, 0, static_cast<off_t>(size));
    if (error != 0 && error != EOPNOTSUPP && error != EINVAL) {
      errno = error;
      throw_errno("allocate space for", path_);
    }
  }
  if (::ftruncate(fd_, static_cast<off_t>(size)) != 0) {
    throw_errno("set the size of", path_);
  }
}

void File::sync() {
  if (::fsync(fd_) != 0) {
    throw_errno("fsync", path_);
  }
}

void File::close() {
  const int fd = fd_;
  fd_ = -1;
  if (fd >= 0 && ::close(fd) != 0) {
    throw_errno("close", path_);
  }
}

FileSink::FileSink(File& file, std::size_t buffer_size) : file_(file), buffer_(buffer_size) {}

void FileSink::write(const void* data, std::size_t size) {
  if (size == 0) return;  // `data` may be null (an empty tensor's), which memcpy must not see
  if (size <= buffer_.size() - used_) {
    std::memcpy(buffer_.data() + used_, data, size);
    used_ += size;
  } else {
    flush();
    if (size < buffer_.size()) {
      std::memcpy(buffer_.data(), data, size);
      used_ = size;
    } else {
      file_.write_all(data, size);
    }
  }
  position_ += size;
}

void FileSink::flush() {
  if (used_ > 0) {
    file_.write_all(buffer_.data(), used_);
    used_ = 0;
  }
}

void FileRangeSource::read(uint64_t offset, void* dst, std::size_t n) const {
  if (offset > length_ || n > length_ - offset) {
    throw CheckpointError(ErrorKind::kCorrupt,
                          description_ + ": read of " + std::to_string(n) + " bytes at offset " +
                              std::to_string(offset) + " is outside the item's " +
                              std::to_string(length_) + " bytes; the checkpoint is damaged");
  }
  file_.read_exactly(base_ + offset, dst, n);
}

}  // namespace dcpp::detail
