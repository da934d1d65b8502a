#include "tensor_parallel_regions.h"

#include "core/group_calls.h"

#include <dcpp/core/checkpoint_error.h>

#include <ATen/ATen.h>

namespace dcpp::detail {
namespace {

constexpr const char* kCaller = "tensor parallel";

at::Tensor summed(const at::Tensor& tensor, const c10::intrusive_ptr<c10d::ProcessGroup>& group,
                  const char* what) {
  std::vector<at::Tensor> buffers{tensor.detach().contiguous().clone()};
  GroupCalls(group, kCaller).all_reduce(buffers, c10d::ReduceOp::SUM, what);
  return buffers[0];
}

}  // namespace

at::Tensor copy_to_region(const at::Tensor& input,
                          const c10::intrusive_ptr<c10d::ProcessGroup>& group) {
  if (!group || group->getSize() == 1 || !input.requires_grad()) return input;
  at::Tensor output = input.view_as(input);
  output.register_hook([group](const at::Tensor& gradient) {
    return summed(gradient, group, "a gradient entering the tensor-parallel region");
  });
  return output;
}

at::Tensor reduce_from_region(const at::Tensor& input,
                              const c10::intrusive_ptr<c10d::ProcessGroup>& group) {
  if (!group || group->getSize() == 1) return input;
  const at::Tensor sum = summed(input, group, "the partial outputs of the tensor-parallel region");
  if (!input.requires_grad()) return sum;
  // The identity to autograd (a clone's backward), holding the sum: exact, whatever the values.
  at::Tensor output = input.clone();
  output.detach().copy_(sum);
  return output;
}

at::Tensor gather_from_region(const at::Tensor& input,
                              const c10::intrusive_ptr<c10d::ProcessGroup>& group) {
  if (!group || group->getSize() == 1) return input;
  std::vector<at::Tensor> pieces =
      GroupCalls(group, kCaller)
          .all_gather(input.detach().contiguous(), "the outputs of the tensor-parallel region");
  pieces[static_cast<std::size_t>(group->getRank())] = input;  // its gradient: this slice
  return at::cat(pieces, -1);
}

at::Tensor scatter_to_region(const at::Tensor& input,
                             const c10::intrusive_ptr<c10d::ProcessGroup>& group) {
  if (!group || group->getSize() == 1) return input;
  const int64_t size = input.size(-1);
  const int64_t ranks = group->getSize();
  if (size % ranks != 0) {
    throw CheckpointError(ErrorKind::kUsage,
                          std::string(kCaller) + " on rank " + std::to_string(group->getRank()) +
                              ": the input's last dimension, " + std::to_string(size) +
                              ", does not split over " + std::to_string(ranks) + " ranks");
  }
  // Each rank's gradient is its slice, zero elsewhere: their sum is the gradient gathered.
  return copy_to_region(input, group).narrow(-1, group->getRank() * (size / ranks), size / ranks);
}

}  // namespace dcpp::detail
