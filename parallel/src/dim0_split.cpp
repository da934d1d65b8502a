#include <dcpp/parallel/dim0_split.h>

#include <dcpp/core/checkpoint_error.h>

#include <algorithm>
#include <string>

namespace dcpp {

RowRange dim0_split(int64_t length, int64_t part, int64_t num_parts) {
  if (num_parts <= 0 || part < 0 || part >= num_parts || length < 0) {
    throw CheckpointError(ErrorKind::kUsage, "dim0_split: part " + std::to_string(part) + " of " +
                                                 std::to_string(num_parts) + " of " +
                                                 std::to_string(length) +
                                                 " rows is not a valid split");
  }
  const int64_t base = length / num_parts;
  const int64_t longer = length % num_parts;
  return RowRange{part * base + std::min(part, longer), base + (part < longer ? 1 : 0)};
}

}  // namespace dcpp
