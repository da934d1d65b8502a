#include "tensor_piece.h"

#include "core/shape_string.h"

#include <dcpp/core/checkpoint_error.h>

#include <ATen/ATen.h>

namespace dcpp::detail {

namespace {

bool contains_box(const Shard& shard, const std::vector<int64_t>& offsets, at::IntArrayRef sizes) {
  for (std::size_t d = 0; d < offsets.size(); ++d) {
    if (offsets[d] < shard.offsets[d] ||
        offsets[d] + sizes[d] > shard.offsets[d] + shard.tensor.size(static_cast<int64_t>(d))) {
      return false;
    }
  }
  return true;
}

}  // namespace

at::Tensor box_of(const at::Tensor& full, const std::vector<int64_t>& offsets,
                  at::IntArrayRef sizes) {
  at::Tensor view = full;
  for (std::size_t d = 0; d < offsets.size(); ++d) {
    view = view.narrow(static_cast<int64_t>(d), offsets[d], sizes[d]);
  }
  return view;
}

at::Tensor piece_of(const StateValue& value, at::IntArrayRef local_sizes,
                    const std::vector<int64_t>& global_shape, const std::vector<int64_t>& offsets,
                    const std::string& key) {
  const bool sharded = !global_shape.empty();
  const std::vector<int64_t> whole_shape = sharded ? global_shape : local_sizes.vec();
  const std::vector<int64_t> where =
      sharded ? offsets : std::vector<int64_t>(local_sizes.size(), 0);
  if (value.is_tensor()) {
    const at::Tensor& tensor = value.tensor();
    if (tensor.sizes() == local_sizes) {
      return tensor;
    }
    if (sharded && tensor.sizes() == at::IntArrayRef(global_shape)) {
      return box_of(tensor, where, local_sizes);
    }
    throw CheckpointError(
        ErrorKind::kIncompatible,
        "state dict key '" + key + "' holds a tensor of shape " + shape_string(tensor.sizes()) +
            ", but the model's tensor has shape " + shape_string(local_sizes) +
            (sharded ? " (a piece of global shape " + shape_string(global_shape) + ")"
                     : std::string()) +
            "; was it saved from another model?");
  }
  if (value.is_sharded_tensor()) {
    const ShardedTensor& sharded_value = value.sharded_tensor();
    if (c10::multiply_integers(local_sizes) == 0) {
      return at::empty(local_sizes, at::TensorOptions().dtype(sharded_value.dtype()));
    }
    if (at::IntArrayRef(sharded_value.global_shape()) != at::IntArrayRef(whole_shape)) {
      throw CheckpointError(ErrorKind::kIncompatible,
                            "state dict key '" + key + "' holds a sharded tensor of global shape " +
                                shape_string(sharded_value.global_shape()) +
                                ", but the model's tensor has global shape " +
                                shape_string(whole_shape));
    }
    for (const Shard& shard : sharded_value.local_shards()) {
      if (contains_box(shard, where, local_sizes)) {
        std::vector<int64_t> relative(where.size());
        for (std::size_t d = 0; d < where.size(); ++d) {
          relative[d] = where[d] - shard.offsets[d];
        }
        return box_of(shard.tensor, relative, local_sizes);
      }
    }
    throw CheckpointError(
        ErrorKind::kIncompatible,
        "state dict key '" + key +
            "' holds a sharded tensor with no local shard covering this process's "
            "piece (offsets " +
            shape_string(where) + ", sizes " + shape_string(local_sizes) +
            "); load it with dcpp::load into a target from get_*_state_dict of this "
            "layout, or pass a whole tensor");
  }
  throw CheckpointError(ErrorKind::kIncompatible, "state dict key '" + key + "' holds a " +
                                                      value.kind_name() + ", not a tensor");
}

namespace {

void offload(StateValue& value) {
  switch (value.kind()) {
    case StateValue::Kind::kTensor:
      if (!value.tensor().device().is_cpu()) {
        value = StateValue(value.tensor().to(at::kCPU));
      }
      break;
    case StateValue::Kind::kShardedTensor: {
      const ShardedTensor& tensor = value.sharded_tensor();
      std::vector<Shard> shards;
      for (const Shard& shard : tensor.local_shards()) {
        shards.push_back(Shard{shard.tensor.to(at::kCPU), shard.offsets});
      }
      value = StateValue(ShardedTensor(tensor.global_shape(), std::move(shards), tensor.dtype()));
      break;
    }
    case StateValue::Kind::kDict:
      offload_to_cpu(value.dict());
      break;
    case StateValue::Kind::kList:
      for (StateValue& element : value.list()) {
        offload(element);
      }
      break;
    default:
      break;
  }
}

}  // namespace

void offload_to_cpu(StateDict& state_dict) {
  for (auto& item : state_dict) {
    offload(item.value);
  }
}

std::string quoted_list(const std::vector<std::string>& keys, std::size_t limit) {
  std::string out;
  for (std::size_t i = 0; i < keys.size() && i < limit; ++i) {
    out += (i > 0 ? ", '" : "'") + keys[i] + "'";
  }
  if (keys.size() > limit) {
    out += " and " + std::to_string(keys.size() - limit) + " more";
  }
  return out;
}

}  // namespace dcpp::detail
