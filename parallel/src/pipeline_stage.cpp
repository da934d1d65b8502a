#include <dcpp/parallel/pipeline_stage.h>

#include "collectives.h"
#include "layer_groups.h"
#include "module_tensors.h"

#include <dcpp/core/checkpoint_error.h>

#include <ATen/ATen.h>

#include <algorithm>

namespace dcpp {

namespace {

const char* const kPipelineStageName = "PipelineStage";
// A tensor travels as a header (dtype, rank, sizes) then its data.
constexpr int kActivationHeaderTag = 0;
constexpr int kActivationTag = 1;
constexpr int kGradientHeaderTag = 2;
constexpr int kGradientTag = 3;
constexpr int64_t kMaxDims = 8;

void send_tensor(detail::GroupCalls& calls, const at::Tensor& tensor, int peer, int header_tag,
                 int data_tag, const std::string& what) {
  if (tensor.dim() > kMaxDims) {
    calls.fail(ErrorKind::kUsage, what + " has " + std::to_string(tensor.dim()) +
                                      " dimensions; a pipeline stage sends at most " +
                                      std::to_string(kMaxDims));
  }
  at::Tensor header = at::zeros({2 + kMaxDims}, at::kLong);
  header[0] = static_cast<int64_t>(tensor.scalar_type());
  header[1] = tensor.dim();
  for (int64_t d = 0; d < tensor.dim(); ++d) {
    header[2 + d] = tensor.size(d);
  }
  calls.send(header, peer, header_tag, "the shape of " + what);
  calls.send(tensor.detach().contiguous(), peer, data_tag, what);
}

// The tensor `peer` sends with send_tensor, on `device` (whichever device it travelled on).
at::Tensor recv_tensor(detail::GroupCalls& calls, int peer, int header_tag, int data_tag,
                       at::Device device, const std::string& what) {
  at::Tensor header = at::zeros({2 + kMaxDims}, at::kLong);
  calls.recv(header, peer, header_tag, "the shape of " + what);
  const auto* h = header.data_ptr<int64_t>();
  const bool dtype_known = h[0] >= 0 && h[0] < static_cast<int64_t>(at::ScalarType::NumOptions) &&
                           h[0] != static_cast<int64_t>(at::ScalarType::Undefined);
  if (!dtype_known || h[1] < 0 || h[1] > kMaxDims ||
      std::any_of(h + 2, h + 2 + h[1], [](int64_t size) { return size < 0; })) {
    calls.fail(ErrorKind::kUsage,
               "received a bad header for " + what + " from rank " + std::to_string(peer));
  }
  std::vector<int64_t> sizes(h + 2, h + 2 + h[1]);
  at::Tensor tensor =
      at::empty(sizes, at::TensorOptions().dtype(static_cast<at::ScalarType>(h[0])).device(device));
  calls.recv(tensor, peer, data_tag, what);
  return tensor;
}

// Where the stage computes: the device of its first parameter or buffer; the CPU without any.
at::Device device_of(const torch::nn::Sequential& modules) {
  for (const at::Tensor& parameter : modules->parameters()) return parameter.device();
  for (const at::Tensor& buffer : modules->buffers()) return buffer.device();
  return at::kCPU;
}

void check_stage_arguments(const torch::nn::Sequential& modules, int64_t first_index,
                           const c10::intrusive_ptr<c10d::ProcessGroup>& group) {
  if (modules.is_empty() || !group || first_index < 0) {
    throw CheckpointError(
        ErrorKind::kUsage,
        "PipelineStage: needs the stage's modules, a process group and a first index >= 0");
  }
}

}  // namespace

PipelineStage::PipelineStage(torch::nn::Sequential stage_modules, int64_t first_index,
                             c10::intrusive_ptr<c10d::ProcessGroup> process_group)
    : modules_(std::move(stage_modules)),
      first_index_(first_index),
      group_(std::move(process_group)) {
  check_stage_arguments(modules_, first_index_, group_);
  detail::refuse_tensor_parallel_layers(*modules_.ptr(), "PipelineStage without a layout within");
}

PipelineStage::PipelineStage(torch::nn::Sequential stage_modules, int64_t first_index,
                             c10::intrusive_ptr<c10d::ProcessGroup> process_group,
                             std::shared_ptr<const ModelLayout> within)
    : modules_(std::move(stage_modules)),
      first_index_(first_index),
      group_(std::move(process_group)),
      within_(std::move(within)) {
  check_stage_arguments(modules_, first_index_, group_);
  if (!within_) {
    throw CheckpointError(ErrorKind::kUsage,
                          "PipelineStage: the layout within the stage must not be null");
  }
}

torch::nn::Sequential PipelineStage::slice(const torch::nn::Sequential& whole, int64_t begin,
                                           int64_t end) {
  const auto size = static_cast<int64_t>(whole->size());
  if (begin < 0 || end > size || begin >= end) {
    throw CheckpointError(ErrorKind::kUsage,
                          "PipelineStage::slice: modules [" + std::to_string(begin) + ", " +
                              std::to_string(end) + ") are not a non-empty range of the " +
                              std::to_string(size) + " modules of the Sequential");
  }
  torch::nn::Sequential out;
  for (int64_t i = begin; i < end; ++i) {
    out->push_back(*(whole->begin() + i));
  }
  return out;
}

std::pair<int64_t, int64_t> PipelineStage::even_bounds(int64_t num_modules, int stage,
                                                       int num_stages) {
  if (num_stages <= 0 || stage < 0 || stage >= num_stages || num_modules < num_stages) {
    throw CheckpointError(ErrorKind::kUsage,
                          "PipelineStage::even_bounds: stage " + std::to_string(stage) + " of " +
                              std::to_string(num_stages) + " cannot own a non-empty part of " +
                              std::to_string(num_modules) + " modules");
  }
  const int64_t base = num_modules / num_stages, longer = num_modules % num_stages;
  const int64_t begin = stage * base + std::min<int64_t>(stage, longer);
  return {begin, begin + base + (stage < longer ? 1 : 0)};
}

std::string PipelineStage::global_name(const std::string& local_name) const {
  const std::size_t dot = local_name.find('.');
  const std::string head = local_name.substr(0, dot);
  if (head.empty() || head.find_first_not_of("0123456789") != std::string::npos) {
    throw CheckpointError(ErrorKind::kUsage, "PipelineStage: the stage-local name '" + local_name +
                                                 "' does not start with a module index");
  }
  const std::string rest = dot == std::string::npos ? "" : local_name.substr(dot);
  return std::to_string(first_index_ + std::stoll(head)) + rest;
}

at::Tensor PipelineStage::forward(const at::Tensor& input) {
  detail::GroupCalls calls(group_, kPipelineStageName);
  InFlight step;
  if (is_first()) {
    if (!input.defined()) {
      calls.fail(ErrorKind::kUsage, "the first stage's forward() needs the input batch");
    }
    step.input = input;
  } else {
    step.input = recv_tensor(calls, stage() - 1, kActivationHeaderTag, kActivationTag,
                             device_of(modules_), "the activations")
                     .requires_grad_(true);
  }
  step.output = modules_->forward(step.input);
  if (!is_last()) {
    send_tensor(calls, step.output, stage() + 1, kActivationHeaderTag, kActivationTag,
                "the activations");
  }
  in_flight_.push_back(step);
  return step.output;
}

void PipelineStage::backward(const at::Tensor& loss) {
  detail::GroupCalls calls(group_, kPipelineStageName);
  if (in_flight_.empty()) {
    calls.fail(ErrorKind::kUsage, "backward() without a forward() to match");
  }
  InFlight step = std::move(in_flight_.front());
  in_flight_.pop_front();
  if (is_last()) {
    if (!loss.defined()) {
      calls.fail(ErrorKind::kUsage, "the last stage's backward() needs the loss");
    }
    loss.backward();
  } else {
    const at::Tensor grad = recv_tensor(calls, stage() + 1, kGradientHeaderTag, kGradientTag,
                                        step.output.device(), "the gradient of the activations");
    step.output.backward(grad);
  }
  if (!is_first()) {
    at::Tensor grad = step.input.grad();
    send_tensor(calls, grad.defined() ? grad : at::zeros_like(step.input), stage() - 1,
                kGradientHeaderTag, kGradientTag, "the gradient of the activations");
  }
}

at::Tensor PipelineStage::broadcast_from_last(at::Tensor value) const {
  value = value.detach().contiguous().clone();
  detail::GroupCalls calls(group_, kPipelineStageName);
  detail::broadcast_tensors(calls, {value}, num_stages() - 1, "a value of the last stage");
  return value;
}

std::vector<ParameterPlacement> PipelineStage::placements() const {
  std::vector<ParameterPlacement> out =
      within_ ? within_->placements() : detail::whole_placements(*modules_);
  for (ParameterPlacement& placement : out) placement.fqn = global_name(placement.fqn);
  return out;
}

}  // namespace dcpp
