#pragma once
// POSIX files for the file system storage: an owned descriptor, a buffered sink, a range source.

#include "format/byte_io.h"
// sync_directory (fsync of a directory), shared with the plugin: dcpp_core_internals.
#include "core/durable_file.h"

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace dcpp::detail {

/// A data file's bytes, read at any offset: a local file, an object in an object store. Reads are
/// thread-safe. Errors are CheckpointErrors naming the file or object.
class RandomAccessData {
 public:
  virtual ~RandomAccessData() = default;
  virtual uint64_t size() const = 0;
  /// Reads exactly n bytes at `offset`; throws if the data is shorter ("truncated").
  virtual void read_exactly(uint64_t offset, void* dst, std::size_t n) const = 0;
  /// As ByteSource::preferred_read_size.
  virtual std::size_t preferred_read_size() const { return std::size_t{1} << 20; }
};

/// An open file descriptor, closed on destruction. Errors are CheckpointErrors naming the path.
class File final : public RandomAccessData {
 public:
  /// kReadWrite opens an existing file for reading and writing, without truncating it.
  enum class Mode { kRead, kCreateTruncate, kReadWrite };
  File(const std::filesystem::path& path, Mode mode);
  ~File() override;
  File(const File&) = delete;
  File& operator=(const File&) = delete;

  int fd() const { return fd_; }
  const std::filesystem::path& path() const { return path_; }
  uint64_t size() const override;
  /// Writes all of [data, data + n) at the current position.
  void write_all(const void* data, std::size_t n);
  /// Reads exactly n bytes at `offset`; throws if the file is shorter ("truncated").
  void read_exactly(uint64_t offset, void* dst, std::size_t n) const override;
  /// From now on, every byte read_exactly reads is added to `counter` (which must outlive this
  /// File).
  void count_reads_in(std::atomic<uint64_t>& counter) { read_counter_ = &counter; }
  /// Writes all of [data, data + n) at `offset` (pwrite: the position is not used or moved, so
  /// several threads may write different ranges at once).
  void write_at(uint64_t offset, const void* data, std::size_t n);
  /// Makes the file `size` bytes long, with its blocks allocated where the file system can
  /// (posix_fallocate; a full disk fails here rather than mid-write).
  void allocate(uint64_t size);
  void sync();
  /// Closes now, reporting errors (a destructor cannot).
  void close();

 private:
  std::filesystem::path path_;
  int fd_ = -1;
  std::atomic<uint64_t>* read_counter_ = nullptr;
};

/// A ByteSink into a File: small writes are gathered in a buffer, large ones go straight to the
/// file. `flush` must be called before the file is synced or closed.
class FileSink final : public ByteSink {
 public:
  explicit FileSink(File& file, std::size_t buffer_size = 1 << 20);
  void write(const void* data, std::size_t size) override;
  uint64_t position() const override { return position_; }
  void flush();

 private:
  File& file_;
  std::vector<char> buffer_;
  std::size_t used_ = 0;
  uint64_t position_ = 0;
};

/// The bytes [base, base + length) of a file or object, as a ByteSource.
class FileRangeSource final : public ByteSource {
 public:
  FileRangeSource(const RandomAccessData& file, uint64_t base, uint64_t length,
                  std::string description)
      : file_(file), base_(base), length_(length), description_(std::move(description)) {}
  uint64_t size() const override { return length_; }
  void read(uint64_t offset, void* dst, std::size_t n) const override;
  std::string describe() const override { return description_; }
  std::size_t preferred_read_size() const override { return file_.preferred_read_size(); }

 private:
  const RandomAccessData& file_;
  uint64_t base_;
  uint64_t length_;
  std::string description_;
};

}  // namespace dcpp::detail
