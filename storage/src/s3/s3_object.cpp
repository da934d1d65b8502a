#include "s3/s3_object.h"

#include "parallel_for.h"

#include <dcpp/core/checkpoint_error.h>

namespace dcpp::detail {

void S3Object::read_exactly(uint64_t offset, void* dst, std::size_t n) const {
  if (offset > size_ || n > size_ - offset) {
    throw CheckpointError(ErrorKind::kCorrupt,
                          client_.url_of(key_) + ": bytes [" + std::to_string(offset) + ", " +
                              std::to_string(offset + n) + ") lie past the end of the " +
                              std::to_string(size_) +
                              "-byte object; it is truncated, load an earlier checkpoint");
  }
  const uint64_t piece = client_.config().part_size;
  const std::size_t pieces = static_cast<std::size_t>((n + piece - 1) / piece);
  char* bytes = static_cast<char*>(dst);
  parallel_for(pieces, client_.config().concurrency, [&](std::size_t i) {
    const uint64_t begin = i * piece;
    const std::size_t length = static_cast<std::size_t>(std::min<uint64_t>(piece, n - begin));
    client_.get_range(key_, offset + begin, bytes + begin, length);
    counter_ += length;
  });
}

}  // namespace dcpp::detail
