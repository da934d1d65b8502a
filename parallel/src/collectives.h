#pragma once
// The collectives of the parallel wrappers, on dcpp's blocking c10d calls (core/group_calls.h):
// errors name the wrapper, the rank and the operation. Collective: made in the same order on every
// rank of the group; not thread-safe.

#include "core/group_calls.h"

#include <ATen/core/Tensor.h>

#include <string>
#include <vector>

namespace dcpp::detail {

/// The tensors' contents laid end to end, grouped by dtype: one flat buffer per dtype and which
/// tensors it holds, in order.
struct FlatGroup {
  at::Tensor flat;
  std::vector<std::size_t> members;
};
std::vector<FlatGroup> group_by_dtype(const std::vector<at::Tensor>& tensors);

/// Every tensor of `tensors` from `root`, in place (one collective per dtype, flattened).
void broadcast_tensors(GroupCalls& calls, const std::vector<at::Tensor>& tensors, int root,
                       const std::string& what);

/// For each of `tensors`, its element-wise mean over the ranks (one all-reduce per dtype): a tensor
/// of its shape and dtype, sharing memory with the others of its dtype. `tensors` are unchanged.
std::vector<at::Tensor> mean_over_ranks(GroupCalls& calls, const std::vector<at::Tensor>& tensors,
                                        const std::string& what);

/// The gradient of every parameter of `parameters` that requires grad, replaced by its mean over
/// the ranks (mean_over_ranks); a parameter without a gradient here counts as zero and gets a
/// zero gradient.
void average_gradients(GroupCalls& calls, const std::vector<at::Tensor>& parameters);

}  // namespace dcpp::detail
