#include <dcpp/parallel/data_parallel.h>

#include "collectives.h"
#include "layer_groups.h"
#include "module_tensors.h"

#include <dcpp/core/checkpoint_error.h>

#include <ATen/ATen.h>

namespace dcpp {

namespace {

const char* const kDataParallelName = "DataParallel";

}  // namespace

DataParallel::DataParallel(std::shared_ptr<torch::nn::Module> module,
                           c10::intrusive_ptr<c10d::ProcessGroup> process_group)
    : module_(std::move(module)), group_(std::move(process_group)) {
  if (module_ == nullptr || !group_) {
    throw CheckpointError(ErrorKind::kUsage,
                          "DataParallel: the module and the process group must not be null");
  }
  detail::refuse_tensor_parallel_layers(*module_, kDataParallelName);
  at::NoGradGuard no_grad;
  std::vector<at::Tensor> tensors = module_->parameters();
  for (const at::Tensor& buffer : module_->buffers()) {
    tensors.push_back(buffer);
  }
  detail::GroupCalls calls(group_, kDataParallelName);
  detail::broadcast_tensors(calls, tensors, 0, "the initial parameters and buffers");
}

void DataParallel::synchronize_gradients() {
  detail::GroupCalls calls(group_, kDataParallelName);
  detail::average_gradients(calls, module_->parameters());
}

void DataParallel::broadcast_buffers() {
  at::NoGradGuard no_grad;
  detail::GroupCalls calls(group_, kDataParallelName);
  detail::broadcast_tensors(calls, module_->buffers(), 0, "the buffers");
}

std::vector<ParameterPlacement> DataParallel::placements() const {
  return detail::whole_placements(*module_);
}

}  // namespace dcpp
