#include <dcpp/state_dict/sharded_tensor.h>

#include "core/shape_string.h"
#include "state_dict/box.h"

#include <dcpp/core/checkpoint_error.h>

#include <ATen/ATen.h>

namespace dcpp {

using detail::shape_string;

ShardedTensor::ShardedTensor(std::vector<int64_t> global_shape, std::vector<Shard> local_shards,
                             std::optional<at::ScalarType> dtype)
    : global_shape_(std::move(global_shape)),
      local_shards_(std::move(local_shards)),
      dtype_(dtype) {
  for (std::size_t i = 0; i < local_shards_.size(); ++i) {
    const Shard& shard = local_shards_[i];
    const std::string which = "shard " + std::to_string(i) + " (offsets " +
                              shape_string(shard.offsets) + ", sizes " +
                              shape_string(shard.tensor.sizes()) + ")";
    if (!shard.tensor.defined()) {
      throw CheckpointError(ErrorKind::kUsage, "ShardedTensor: " + which + " has no tensor");
    }
    if (shard.offsets.size() != global_shape_.size() ||
        static_cast<std::size_t>(shard.tensor.dim()) != global_shape_.size()) {
      throw CheckpointError(ErrorKind::kUsage, "ShardedTensor: " + which + " does not have the " +
                                                   std::to_string(global_shape_.size()) +
                                                   " dimensions of global shape " +
                                                   shape_string(global_shape_));
    }
    if (!detail::box_lies_inside(shard.offsets, shard.tensor.sizes(), global_shape_)) {
      throw CheckpointError(
          ErrorKind::kUsage,
          "ShardedTensor: " + which + " lies outside global shape " + shape_string(global_shape_));
    }
    const at::ScalarType expected = dtype_.value_or(local_shards_.front().tensor.scalar_type());
    if (shard.tensor.scalar_type() != expected) {
      throw CheckpointError(ErrorKind::kUsage,
                            "ShardedTensor: " + which + " has dtype " +
                                std::string(c10::toString(shard.tensor.scalar_type())) + ", not " +
                                c10::toString(expected));
    }
  }
}

ShardedTensor ShardedTensor::from_chunk_of(const at::Tensor& full, int64_t dim, int64_t part,
                                           int64_t num_parts) {
  if (dim < 0 || dim >= full.dim() || num_parts <= 0 || part < 0 || part >= num_parts) {
    throw CheckpointError(ErrorKind::kUsage,
                          "ShardedTensor::from_chunk_of: part " + std::to_string(part) + " of " +
                              std::to_string(num_parts) + " along dim " + std::to_string(dim) +
                              " is not valid for a tensor of shape " + shape_string(full.sizes()));
  }
  const int64_t length = full.size(dim);
  const int64_t base = length / num_parts;
  const int64_t longer = length % num_parts;
  const int64_t begin = part * base + std::min(part, longer);
  const int64_t size = base + (part < longer ? 1 : 0);
  std::vector<int64_t> offsets(full.dim(), 0);
  offsets[dim] = begin;
  return ShardedTensor(full.sizes().vec(), {Shard{full.narrow(dim, begin, size), offsets}},
                       full.scalar_type());
}

at::ScalarType ShardedTensor::dtype() const {
  if (dtype_) {
    return *dtype_;
  }
  return local_shards_.empty() ? at::kFloat : local_shards_.front().tensor.scalar_type();
}

}  // namespace dcpp
