#pragma once
// Where the codecs write bytes to and read bytes from: a stream, a file range, memory.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace dcpp::detail {

/// A sequential destination of bytes. Not thread-safe. `write` throws CheckpointError on failure.
class ByteSink {
 public:
  virtual ~ByteSink() = default;
  virtual void write(const void* data, std::size_t size) = 0;
  /// Bytes written so far.
  virtual uint64_t position() const = 0;
};

/// A random-access source of `size()` bytes (one item of a data file, or memory). `read` fills
/// `dst` with bytes [offset, offset + n) and throws CheckpointError, naming `describe()`, when the
/// range is out of bounds or the read fails; `dst` may be null when `n` is 0 (the data of an empty
/// tensor). Thread-safe for concurrent reads.
class ByteSource {
 public:
  virtual ~ByteSource() = default;
  virtual uint64_t size() const = 0;
  virtual void read(uint64_t offset, void* dst, std::size_t n) const = 0;
  /// What to name in errors: "file __0_0.distcp, key 'model.weight'".
  virtual std::string describe() const = 0;
  /// How many bytes a reader of a long range should ask for at once: 1 MiB for a file (a block
  /// stays in the cache while it is checksummed); more where each read is a request over a
  /// network, whose latency only large reads amortize.
  virtual std::size_t preferred_read_size() const { return std::size_t{1} << 20; }
};

/// Appends to a string it owns.
class MemorySink final : public ByteSink {
 public:
  void write(const void* data, std::size_t size) override {
    buffer_.append(static_cast<const char*>(data), size);
  }
  uint64_t position() const override { return buffer_.size(); }
  std::string& buffer() { return buffer_; }

 private:
  std::string buffer_;
};

/// Reads from memory the caller keeps alive.
class MemorySource final : public ByteSource {
 public:
  MemorySource(std::string_view bytes, std::string description)
      : bytes_(bytes), description_(std::move(description)) {}
  uint64_t size() const override { return bytes_.size(); }
  void read(uint64_t offset, void* dst, std::size_t n) const override;
  std::string describe() const override { return description_; }

 private:
  std::string_view bytes_;
  std::string description_;
};

}  // namespace dcpp::detail
