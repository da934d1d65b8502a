#pragma once
// The dim-0 split of a fully sharded parameter: ShardedTensor::from_chunk_of's split.

#include <dcpp/core/export.h>

#include <cstdint>

namespace dcpp {

/// Rows [begin, begin + size) of a dimension.
struct DCPP_API RowRange {
  int64_t begin = 0;
  int64_t size = 0;
  int64_t end() const { return begin + size; }
};

/// The rows part `part` of `num_parts` holds when `length` rows are split into near-equal parts,
/// the first `length % num_parts` parts one row longer (ShardedTensor::from_chunk_of's split; a
/// part may be empty when `length < num_parts`). Throws CheckpointError when `part` is outside
/// [0, num_parts) or `length` is negative. Pure function: thread-safe.
DCPP_API RowRange dim0_split(int64_t length, int64_t part, int64_t num_parts);

}  // namespace dcpp
