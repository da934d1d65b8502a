#include "s3/driver/s3_upload_sink.h"

#include <algorithm>
#include <cstring>

namespace dcpp::detail {

S3UploadSink::S3UploadSink(S3Client& client, std::string key, int max_in_flight)
    : client_(client),
      key_(std::move(key)),
      first_part_size_(static_cast<std::size_t>(client.config().part_size)),
      part_size_(first_part_size_),
      max_in_flight_(static_cast<std::size_t>(std::max(max_in_flight, 1))) {
  buffer_.reserve(part_size_);
}

std::size_t S3UploadSink::part_size_of(std::size_t first, int part_number) {
  constexpr std::size_t kLargestPart = std::size_t{5} << 30;
  std::size_t size = first;
  for (int doublings = (part_number - 1) / kPartsPerSize; doublings > 0 && size < kLargestPart;
       --doublings) {
    size *= 2;
  }
  return std::min(size, kLargestPart);
}

S3UploadSink::~S3UploadSink() {
  if (finished_) return;
  for (std::future<void>& part : in_flight_) {
    try {
      part.get();
    } catch (...) {  // the upload is abandoned: its first error was, or will be, reported
    }
  }
  if (!upload_.upload_id.empty()) client_.abort_multipart_upload(key_, upload_.upload_id);
}

void S3UploadSink::write(const void* data, std::size_t size) {
  const char* bytes = static_cast<const char*>(data);
  while (size > 0) {
    const std::size_t n = std::min(size, part_size_ - buffer_.size());
    buffer_.append(bytes, n);
    bytes += n;
    size -= n;
    position_ += n;
    if (buffer_.size() == part_size_) start_part();
  }
}

void S3UploadSink::start_part() {
  if (upload_.upload_id.empty()) upload_ = client_.create_multipart_upload(key_);
  while (in_flight_.size() >= max_in_flight_) wait_oldest();
  const int number = static_cast<int>(parts_.size()) + 1;
  parts_.push_back(S3UploadedPart{number, "", ""});
  S3UploadedPart* part = &parts_.back();  // a deque's elements stay put as it grows
  in_flight_.push_back(
      std::async(std::launch::async, [this, number, part, body = std::move(buffer_)] {
        *part = client_.upload_part(key_, upload_, number, body);
      }));
  part_size_ = part_size_of(first_part_size_, number + 1);
  buffer_ = std::string();
  buffer_.reserve(part_size_);
}

void S3UploadSink::wait_oldest() {
  std::future<void> oldest = std::move(in_flight_.front());
  in_flight_.pop_front();
  oldest.get();
}

void S3UploadSink::finish() {
  if (upload_.upload_id.empty()) {
    client_.put_object(key_, buffer_);
  } else {
    if (!buffer_.empty() || parts_.empty()) start_part();
    while (!in_flight_.empty()) wait_oldest();
    client_.complete_multipart_upload(key_, upload_.upload_id, {parts_.begin(), parts_.end()});
  }
  finished_ = true;
}

}  // namespace dcpp::detail
