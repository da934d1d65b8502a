#include "collectives.h"

#include <ATen/ATen.h>

#include <map>

namespace dcpp::detail {

std::vector<FlatGroup> group_by_dtype(const std::vector<at::Tensor>& tensors) {
  std::map<at::ScalarType, std::vector<std::size_t>> by_dtype;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    by_dtype[tensors[i].scalar_type()].push_back(i);
  }
  std::vector<FlatGroup> groups;
  for (auto& [dtype, members] : by_dtype) {
    std::vector<at::Tensor> pieces;
    pieces.reserve(members.size());
    for (std::size_t i : members) {
      pieces.push_back(tensors[i].reshape({-1}));
    }
    groups.push_back({at::cat(pieces), std::move(members)});
  }
  return groups;
}

namespace {

// Calls `each(i, piece)` for every member i of `group` with its piece of the flat buffer, shaped
// like tensors[i].
template <typename Each>
void unflatten(const FlatGroup& group, const std::vector<at::Tensor>& tensors, Each each) {
  int64_t offset = 0;
  for (std::size_t i : group.members) {
    const at::Tensor& tensor = tensors[i];
    each(i, group.flat.narrow(0, offset, tensor.numel()).view(tensor.sizes()));
    offset += tensor.numel();
  }
}

}  // namespace

void broadcast_tensors(GroupCalls& calls, const std::vector<at::Tensor>& tensors, int root,
                       const std::string& what) {
  for (FlatGroup& group : group_by_dtype(tensors)) {
    std::vector<at::Tensor> buffers{group.flat};
    calls.broadcast(buffers, root, what);
    unflatten(group, tensors,
              [&](std::size_t i, const at::Tensor& piece) { tensors[i].copy_(piece); });
  }
}

std::vector<at::Tensor> mean_over_ranks(GroupCalls& calls, const std::vector<at::Tensor>& tensors,
                                        const std::string& what) {
  std::vector<at::Tensor> means(tensors.size());
  for (FlatGroup& group : group_by_dtype(tensors)) {
    std::vector<at::Tensor> buffers{group.flat};
    calls.all_reduce(buffers, c10d::ReduceOp::SUM, what);
    group.flat.div_(static_cast<double>(calls.size()));
    unflatten(group, tensors, [&](std::size_t i, const at::Tensor& piece) { means[i] = piece; });
  }
  return means;
}

void average_gradients(GroupCalls& calls, const std::vector<at::Tensor>& parameters) {
  std::vector<at::Tensor> grads;
  for (at::Tensor param : parameters) {
    if (!param.requires_grad()) continue;
    if (!param.grad().defined()) param.mutable_grad() = at::zeros_like(param);
    grads.push_back(param.grad());
  }
  const std::vector<at::Tensor> means = mean_over_ranks(calls, grads, "the gradients");
  for (std::size_t i = 0; i < grads.size(); ++i) grads[i].copy_(means[i]);
}

}  // namespace dcpp::detail
