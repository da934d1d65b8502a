#pragma once
// An object in a store, read at any offset: what the item reader reads a data file through.

#include "format/file_io.h"
#include "s3/s3_client.h"

#include <atomic>
#include <cstdint>
#include <string>

namespace dcpp::detail {

/// The object `key` of `size` bytes. Reads larger than the client's part size are split into
/// ranged GETs of that size, issued `concurrency` at a time; every byte fetched is added to
/// `counter`.
class S3Object final : public RandomAccessData {
 public:
  S3Object(S3Client& client, std::string key, uint64_t size, std::atomic<uint64_t>& counter)
      : client_(client), key_(std::move(key)), size_(size), counter_(counter) {}

  uint64_t size() const override { return size_; }
  void read_exactly(uint64_t offset, void* dst, std::size_t n) const override;

 private:
  S3Client& client_;
  std::string key_;
  uint64_t size_;
  std::atomic<uint64_t>& counter_;
};

}  // namespace dcpp::detail
