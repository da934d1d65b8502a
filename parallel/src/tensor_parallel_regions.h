#pragma once
// Megatron-Core's tensor-parallel regions (megatron/core/tensor_parallel/mappings.py) in
// libtorch's autograd: what each does forward, and what its backward does to the gradient. Each is
// collective over `group` forward or backward (every rank of it, in the same order); errors are
// CheckpointErrors naming the rank and the operation. A null group is this process alone.

#include <ATen/core/Tensor.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

namespace dcpp::detail {

/// Forward: `input`. Backward: the gradient's sum over the group (the input was used by every
/// rank's part of a split computation).
at::Tensor copy_to_region(const at::Tensor& input,
                          const c10::intrusive_ptr<c10d::ProcessGroup>& group);

/// Forward: the sum of `input` over the group. Backward: the gradient as it is.
at::Tensor reduce_from_region(const at::Tensor& input,
                              const c10::intrusive_ptr<c10d::ProcessGroup>& group);

/// Forward: every rank's `input` (one shape on every rank) concatenated along the last dimension,
/// in rank order. Backward: this rank's slice of the gradient.
at::Tensor gather_from_region(const at::Tensor& input,
                              const c10::intrusive_ptr<c10d::ProcessGroup>& group);

/// Forward: this rank's slice of `input`'s last dimension (its size a multiple of the group's).
/// Backward: the gradient of every rank's slice, gathered.
at::Tensor scatter_to_region(const at::Tensor& input,
                             const c10::intrusive_ptr<c10d::ProcessGroup>& group);

}  // namespace dcpp::detail
