#include "s3/driver/s3_object.h"

#include "parallel_for.h"

#include <dcpp/core/checkpoint_error.h>

#include <cstring>

namespace dcpp::detail {

namespace {

constexpr std::size_t kSmallRead = std::size_t{64} << 10;
constexpr std::size_t kWindow = std::size_t{256} << 10;

}  // namespace

void S3Object::read_exactly(uint64_t offset, void* dst, std::size_t n) const {
  if (offset > size_ || n > size_ - offset) {
    throw CheckpointError(ErrorKind::kCorrupt,
                          client_.url_of(key_) + ": bytes [" + std::to_string(offset) + ", " +
                              std::to_string(offset + n) + ") lie past the end of the " +
                              std::to_string(size_) +
                              "-byte object; it is truncated, load an earlier checkpoint");
  }
  if (n == 0) return;
  if (n <= kSmallRead) {
    read_small(offset, dst, n);
    return;
  }
  const uint64_t piece = client_.config().part_size;
  const std::size_t pieces = static_cast<std::size_t>((n + piece - 1) / piece);
  char* bytes = static_cast<char*>(dst);
  parallel_for(pieces, client_.config().concurrency, [&](std::size_t i) {
    const uint64_t begin = i * piece;
    fetch(offset + begin, bytes + begin,
          static_cast<std::size_t>(std::min<uint64_t>(piece, n - begin)));
  });
}

void S3Object::read_small(uint64_t offset, void* dst, std::size_t n) const {
  const std::lock_guard<std::mutex> lock(windows_mutex_);
  for (const Window& window : windows_) {
    if (offset >= window.begin && offset + n <= window.begin + window.bytes.size()) {
      std::memcpy(dst, window.bytes.data() + (offset - window.begin), n);
      return;
    }
  }
  Window& window = windows_[older_];
  older_ = 1 - older_;
  window.bytes.assign(static_cast<std::size_t>(std::min<uint64_t>(kWindow, size_ - offset)), '\0');
  window.begin = offset;
  try {
    fetch(offset, window.bytes.data(), window.bytes.size());
  } catch (...) {
    window.bytes.clear();
    throw;
  }
  std::memcpy(dst, window.bytes.data(), n);
}

void S3Object::fetch(uint64_t offset, void* dst, std::size_t n) const {
  client_.get_range(key_, offset, dst, n);
  counter_ += n;
}

std::size_t S3Object::preferred_read_size() const {
  return static_cast<std::size_t>(client_.config().part_size) *
         static_cast<std::size_t>(client_.config().concurrency);
}

}  // namespace dcpp::detail
