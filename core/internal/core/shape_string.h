#pragma once
// Shapes in error messages.

#include <c10/util/ArrayRef.h>

#include <cstdint>
#include <string>

namespace dcpp::detail {

/// "[2, 3]" ("[]" for a scalar).
inline std::string shape_string(c10::ArrayRef<int64_t> shape) {
  std::string out = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    out += (i ? ", " : "") + std::to_string(shape[i]);
  }
  return out + "]";
}

}  // namespace dcpp::detail
