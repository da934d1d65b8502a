#include <dcpp/parallel/tensor_parallel.h>

#include "collectives.h"
#include "layer_groups.h"
#include "module_tensors.h"

#include <dcpp/core/checkpoint_error.h>
#include <dcpp/parallel/tensor_parallel_layers.h>

#include <ATen/ATen.h>

#include <unordered_map>

namespace dcpp {
namespace {

constexpr const char* kTensorParallelName = "TensorParallel";

// The sliced parameters of every tensor-parallel layer of `model`, by tensor.
std::unordered_map<const c10::TensorImpl*, ParameterPlacement> sliced_tensors(
    const torch::nn::Module& model) {
  std::unordered_map<const c10::TensorImpl*, ParameterPlacement> sliced;
  for (const auto& module : model.modules(/*include_self=*/true)) {
    const auto* layer = dynamic_cast<const TensorParallelModule*>(module.get());
    if (layer == nullptr) continue;
    for (ParameterPlacement& placement : layer->sliced_parameters()) {
      const c10::TensorImpl* key = placement.local.unsafeGetTensorImpl();
      sliced.emplace(key, std::move(placement));
    }
  }
  return sliced;
}

}  // namespace

TensorParallel::TensorParallel(std::shared_ptr<torch::nn::Module> model,
                               c10::intrusive_ptr<c10d::ProcessGroup> tensor_group,
                               c10::intrusive_ptr<c10d::ProcessGroup> data_group)
    : model_(std::move(model)),
      tensor_group_(std::move(tensor_group)),
      data_group_(std::move(data_group)) {
  if (model_ == nullptr || !tensor_group_) {
    throw CheckpointError(ErrorKind::kUsage,
                          "TensorParallel: the model and the tensor-parallel group must not be "
                          "null");
  }
  detail::GroupCalls tensor_calls(tensor_group_, kTensorParallelName);
  const detail::ShardGroupVerdict verdict =
      detail::check_layers_split_over(tensor_calls, detail::tensor_parallel_layers(*model_));
  if (data_group_) {
    detail::GroupCalls data_calls(data_group_, kTensorParallelName);
    detail::replicate_group_check(data_calls, kTensorParallelName, verdict, "tensor-parallel",
                                  "data-parallel",
                                  "on a DeviceMesh {\"dp\", \"tp\"}: TensorParallel(model, "
                                  "mesh.group(\"tp\"), mesh.group(\"dp\"))");
  } else if (!verdict.refusal.empty()) {
    throw CheckpointError(ErrorKind::kUsage, verdict.refusal);
  }
  at::NoGradGuard no_grad;
  const auto sliced = sliced_tensors(*model_);
  std::vector<at::Tensor> whole, all;
  for (const detail::NamedTensor& named : detail::module_tensors(*model_)) {
    if (sliced.count(named.tensor.unsafeGetTensorImpl()) == 0) whole.push_back(named.tensor);
    all.push_back(named.tensor);
  }
  detail::broadcast_tensors(tensor_calls, whole, 0, "the whole parameters and buffers");
  if (data_group_) {
    detail::GroupCalls data_calls(data_group_, kTensorParallelName);
    detail::broadcast_tensors(data_calls, all, 0, "the parameters and buffers");
  }
}

void TensorParallel::synchronize_gradients() {
  if (!data_group_) return;
  detail::GroupCalls calls(data_group_, kTensorParallelName);
  detail::average_gradients(calls, model_->parameters());
}

std::vector<ParameterPlacement> TensorParallel::placements() const {
  const auto sliced = sliced_tensors(*model_);
  std::vector<ParameterPlacement> out = detail::whole_placements(*model_);
  for (ParameterPlacement& placement : out) {
    const auto found = sliced.find(placement.local.unsafeGetTensorImpl());
    if (found == sliced.end()) continue;
    placement.global_shape = found->second.global_shape;
    placement.offsets = found->second.offsets;
  }
  return out;
}

}  // namespace dcpp
