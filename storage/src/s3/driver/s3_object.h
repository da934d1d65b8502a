#pragma once
// An object in a store, read at any offset: what the item reader reads a data file through.

#include "format/file_io.h"
#include "s3/protocol/s3_client.h"

#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>

namespace dcpp::detail {

/// The object `key` of `size` bytes. Every byte fetched is added to `counter`.
///   - Small reads (an archive's headers and directory, a value) are served from windows of
///     256 KiB fetched whole: the headers around an item, and the next item's, cost one request,
///     not one each. Two windows are kept (an archive's start and end), the older replaced.
///   - Reads larger than a part are split into ranged GETs of the client's part size, issued
///     `concurrency` at a time.
/// Thread-safe.
class S3Object final : public RandomAccessData {
 public:
  S3Object(S3Client& client, std::string key, uint64_t size, std::atomic<uint64_t>& counter)
      : client_(client), key_(std::move(key)), size_(size), counter_(counter) {}

  uint64_t size() const override { return size_; }
  void read_exactly(uint64_t offset, void* dst, std::size_t n) const override;
  /// A part for every request in flight: a long range is fetched `concurrency` parts at a time.
  std::size_t preferred_read_size() const override;

 private:
  struct Window {
    uint64_t begin = 0;
    std::string bytes;
  };

  void read_small(uint64_t offset, void* dst, std::size_t n) const;
  void fetch(uint64_t offset, void* dst, std::size_t n) const;

  S3Client& client_;
  std::string key_;
  uint64_t size_;
  std::atomic<uint64_t>& counter_;
  mutable std::mutex windows_mutex_;
  mutable std::array<Window, 2> windows_;
  mutable std::size_t older_ = 0;  // the window the next miss replaces
};

}  // namespace dcpp::detail
