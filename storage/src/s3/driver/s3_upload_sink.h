#pragma once
// A data file streamed into an object: a single PUT when it fits one part, else a multipart
// upload whose parts go up in the background while the next is filled.

#include "format/byte_io.h"
#include "s3/protocol/s3_client.h"

#include <cstdint>
#include <deque>
#include <future>
#include <string>
#include <vector>

namespace dcpp::detail {

/// Bytes written are gathered into parts (part_size_of: the client's part size, doubled every
/// kPartsPerSize parts, so that S3's 10,000 parts hold any object up to its 5 TiB); each full
/// part is uploaded on a thread of its own, at most `max_in_flight` at once (a write waits for the
/// oldest). The object exists only after `finish` returned. Destroyed without a successful
/// `finish` (an error, an exception), it waits for its parts in flight and aborts the multipart
/// upload, so no part is left behind. Memory: up to (max_in_flight + 1) parts.
class S3UploadSink final : public ByteSink {
 public:
  S3UploadSink(S3Client& client, std::string key, int max_in_flight);
  ~S3UploadSink() override;
  S3UploadSink(const S3UploadSink&) = delete;
  S3UploadSink& operator=(const S3UploadSink&) = delete;

  static constexpr int kPartsPerSize = 500;
  /// The size of part `part_number` (from 1) of an upload whose first part is `first` bytes:
  /// doubled after every kPartsPerSize parts, at most 5 GiB (S3's largest part).
  static std::size_t part_size_of(std::size_t first, int part_number);

  void write(const void* data, std::size_t size) override;
  uint64_t position() const override { return position_; }
  /// Uploads what is left and completes the upload. Throws the first failed part's error.
  void finish();

 private:
  void start_part();
  void wait_oldest();

  S3Client& client_;
  std::string key_;
  std::size_t first_part_size_;
  std::size_t part_size_;  // of the part being filled
  std::size_t max_in_flight_;
  std::string buffer_;
  uint64_t position_ = 0;
  S3NewUpload upload_;  // its upload_id empty until the first part is started
  std::deque<S3UploadedPart> parts_;
  std::deque<std::future<void>> in_flight_;
  bool finished_ = false;
};

}  // namespace dcpp::detail
