#pragma once
// Boxes of a tensor: a chunk, a shard or a piece at `offsets` with `sizes`.

#include <c10/util/ArrayRef.h>

#include <cstddef>
#include <cstdint>

namespace dcpp::detail {

/// Whether the box at `offsets` with `sizes` lies inside a tensor of `shape`: as many dimensions,
/// offsets and sizes not negative, and offset + size within the shape in every dimension (an empty
/// box may sit at the end). Safe for any int64 values (no overflow).
inline bool box_lies_inside(c10::ArrayRef<int64_t> offsets, c10::ArrayRef<int64_t> sizes,
                            c10::ArrayRef<int64_t> shape) {
  if (offsets.size() != shape.size() || sizes.size() != shape.size()) return false;
  for (std::size_t d = 0; d < shape.size(); ++d) {
    if (offsets[d] < 0 || sizes[d] < 0 || offsets[d] > shape[d] || sizes[d] > shape[d] - offsets[d]) {
      return false;
    }
  }
  return true;
}

}  // namespace dcpp::detail
