#include "format/byte_io.h"

#include <dcpp/core/checkpoint_error.h>

#include <cstring>

namespace dcpp::detail {

void MemorySource::read(uint64_t offset, void* dst, std::size_t n) const {
  if (offset > bytes_.size() || n > bytes_.size() - offset) {
    throw CheckpointError(ErrorKind::kCorrupt,
                          description_ + ": read of " + std::to_string(n) + " bytes at offset " +
                              std::to_string(offset) + " is past its end (" +
                              std::to_string(bytes_.size()) + " bytes); the data is truncated");
  }
  if (n > 0) {
    std::memcpy(dst, bytes_.data() + offset, n);  // dst may be null when n is 0 (an empty tensor)
  }
}

}  // namespace dcpp::detail
