#pragma once
// A tensor of which this process holds only some pieces, in the global tensor's coordinates.

#include <dcpp/core/export.h>

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <optional>
#include <vector>

namespace dcpp {

/// One locally held piece of a sharded tensor: `tensor` covers the global box that starts at
/// `offsets` and has `tensor.sizes()`.
struct DCPP_API Shard {
  at::Tensor tensor;
  std::vector<int64_t> offsets;
};

/// A tensor of global shape `global_shape` of which this process holds `local_shards` (zero, one or
/// several). Shards of all processes together cover the tensor; the same box may be held by several
/// processes (replication) and is then saved once. Shard tensors share storage with the caller's
/// tensors: loading writes into them in place.
class DCPP_API ShardedTensor {
 public:
  ShardedTensor() = default;
  /// Throws CheckpointError if a shard's rank, dtype or bounds do not fit `global_shape`. `dtype`
  /// is needed only when this process holds no shard (an uneven split can leave a rank without
  /// rows); otherwise the shards' dtype is used and must equal it when given.
  ShardedTensor(std::vector<int64_t> global_shape, std::vector<Shard> local_shards,
                std::optional<at::ScalarType> dtype = std::nullopt);

  /// A tensor split along `dim` into `num_parts` near-equal parts (the first `size % num_parts`
  /// parts one row longer), of which this process holds `part`: the layout of a dim-0 FSDP shard.
  static ShardedTensor from_chunk_of(const at::Tensor& full, int64_t dim, int64_t part,
                                     int64_t num_parts);

  const std::vector<int64_t>& global_shape() const { return global_shape_; }
  const std::vector<Shard>& local_shards() const { return local_shards_; }
  /// The dtype of the shards (or the one given; float32 when neither).
  at::ScalarType dtype() const;

 private:
  std::vector<int64_t> global_shape_;
  std::vector<Shard> local_shards_;
  std::optional<at::ScalarType> dtype_;
};

}  // namespace dcpp
