#pragma once
// Private: finding this process's piece of a saved tensor value, and small tree walks the
// state-dict helpers share.

#include <dcpp/state_dict/state_dict.h>

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

namespace dcpp::detail {

/// The view of `full` that starts at `offsets` and has `sizes`.
at::Tensor box_of(const at::Tensor& full, const std::vector<int64_t>& offsets,
                  at::IntArrayRef sizes);

/// The piece of `value` a target tensor of `local_sizes` holds: at `offsets` of a tensor of
/// `global_shape` when sharded, or whole (`global_shape` empty). `value` may be a tensor of the
/// local shape, a whole tensor (sharded targets take their box), or a ShardedTensor holding a
/// shard that covers the box. The result is a view of `value`'s tensors (no copy). Throws
/// CheckpointError naming `key` on a shape mismatch or a value that is not a tensor.
at::Tensor piece_of(const StateValue& value, at::IntArrayRef local_sizes,
                    const std::vector<int64_t>& global_shape, const std::vector<int64_t>& offsets,
                    const std::string& key);

/// Copies every tensor (and shard) of `state_dict` to the CPU (no copy for CPU tensors).
void offload_to_cpu(StateDict& state_dict);

/// "'a', 'b', 'c'" (at most `limit` keys, then "and N more").
std::string quoted_list(const std::vector<std::string>& keys, std::size_t limit = 20);

}  // namespace dcpp::detail
