#include <dcpp/parallel/tensor_parallel_layers.h>

#include "tensor_parallel_regions.h"

#include <dcpp/core/checkpoint_error.h>

#include <ATen/ATen.h>
#include <torch/nn/functional/embedding.h>

namespace dcpp {
namespace {

int group_rank(const c10::intrusive_ptr<c10d::ProcessGroup>& group) {
  return group ? group->getRank() : 0;
}
int group_size(const c10::intrusive_ptr<c10d::ProcessGroup>& group) {
  return group ? group->getSize() : 1;
}

// Rank r's slice of `size` split evenly over the group: its length; throws unless it divides.
int64_t slice_length(const char* layer, const char* what, int64_t size,
                     const c10::intrusive_ptr<c10d::ProcessGroup>& group) {
  if (size % group_size(group) != 0) {
    throw CheckpointError(
        ErrorKind::kUsage,
        std::string(layer) + " on rank " + std::to_string(group_rank(group)) + ": its " + what +
            ", " + std::to_string(size) + ", does not split evenly over the " +
            std::to_string(group_size(group)) + " ranks of the tensor-parallel group");
  }
  return size / group_size(group);
}

at::Tensor slice_of(const at::Tensor& whole, int64_t dim, int64_t length, int rank) {
  return whole.detach().narrow(dim, length * rank, length).clone();
}

// `local`, of the whole tensor of `whole_shape`, starting at `first` along `dim`.
ParameterPlacement sliced(const char* name, const at::Tensor& local,
                          std::vector<int64_t> whole_shape, int64_t dim, int64_t first) {
  std::vector<int64_t> offsets(static_cast<std::size_t>(local.dim()), 0);
  offsets[static_cast<std::size_t>(dim)] = first;
  return ParameterPlacement{name, local, std::move(whole_shape), std::move(offsets), false};
}

}  // namespace

ColumnParallelLinearImpl::ColumnParallelLinearImpl(const torch::nn::Linear& whole,
                                                   c10::intrusive_ptr<c10d::ProcessGroup> group,
                                                   bool gather_output)
    : group_(std::move(group)),
      gather_output_(gather_output),
      out_features_(whole->weight.size(0)) {
  const int64_t rows =
      slice_length("ColumnParallelLinear", "output features", out_features_, group_);
  weight = register_parameter("weight", slice_of(whole->weight, 0, rows, group_rank(group_)));
  if (whole->bias.defined()) {
    bias = register_parameter("bias", slice_of(whole->bias, 0, rows, group_rank(group_)));
  }
}

at::Tensor ColumnParallelLinearImpl::forward(const at::Tensor& input) {
  const at::Tensor output = at::linear(detail::copy_to_region(input, group_), weight, bias);
  return gather_output_ ? detail::gather_from_region(output, group_) : output;
}

std::vector<ParameterPlacement> ColumnParallelLinearImpl::sliced_parameters() const {
  const int64_t first = weight.size(0) * group_rank(group_);
  std::vector<ParameterPlacement> out{
      sliced("weight", weight, {out_features_, weight.size(1)}, 0, first)};
  if (bias.defined()) out.push_back(sliced("bias", bias, {out_features_}, 0, first));
  return out;
}

RowParallelLinearImpl::RowParallelLinearImpl(const torch::nn::Linear& whole,
                                             c10::intrusive_ptr<c10d::ProcessGroup> group,
                                             bool input_is_parallel)
    : group_(std::move(group)),
      input_is_parallel_(input_is_parallel),
      in_features_(whole->weight.size(1)) {
  const int64_t columns = slice_length("RowParallelLinear", "input features", in_features_, group_);
  weight = register_parameter("weight", slice_of(whole->weight, 1, columns, group_rank(group_)));
  if (whole->bias.defined()) bias = register_parameter("bias", whole->bias.detach().clone());
}

at::Tensor RowParallelLinearImpl::forward(const at::Tensor& input) {
  const at::Tensor parallel_input =
      input_is_parallel_ ? input : detail::scatter_to_region(input, group_);
  const at::Tensor output = detail::reduce_from_region(at::linear(parallel_input, weight), group_);
  return bias.defined() ? output + bias : output;
}

std::vector<ParameterPlacement> RowParallelLinearImpl::sliced_parameters() const {
  return {sliced("weight", weight, {weight.size(0), in_features_}, 1,
                 weight.size(1) * group_rank(group_))};
}

VocabParallelEmbeddingImpl::VocabParallelEmbeddingImpl(const torch::nn::Embedding& whole,
                                                       c10::intrusive_ptr<c10d::ProcessGroup> group)
    : group_(std::move(group)), vocab_size_(whole->weight.size(0)) {
  const int64_t rows = slice_length("VocabParallelEmbedding", "vocabulary", vocab_size_, group_);
  first_id_ = rows * group_rank(group_);
  weight = register_parameter("weight", slice_of(whole->weight, 0, rows, group_rank(group_)));
}

at::Tensor VocabParallelEmbeddingImpl::forward(const at::Tensor& ids) {
  const at::Tensor outside = (ids < first_id_).logical_or(ids >= first_id_ + weight.size(0));
  const at::Tensor local_ids = (ids - first_id_).masked_fill(outside, 0);
  const at::Tensor rows = at::embedding(weight, local_ids).masked_fill(outside.unsqueeze(-1), 0);
  return detail::reduce_from_region(rows, group_);
}

std::vector<ParameterPlacement> VocabParallelEmbeddingImpl::sliced_parameters() const {
  return {sliced("weight", weight, {vocab_size_, weight.size(1)}, 0, first_id_)};
}

}  // namespace dcpp
