#pragma once
// Megatron-Core's tensor-parallel layers (megatron/core/tensor_parallel/layers.py) as libtorch
// modules: each rank of the tensor-parallel group holds a slice of the layer's weight and computes
// its part, the collectives in the forward and backward passes joining the parts. A model built of
// them is described to the state-dict helpers by dcpp::TensorParallel (tensor_parallel.h), which
// keys each slice by its place in the whole tensor, so a checkpoint holds the layer unsplit.

#include <dcpp/core/export.h>
#include <dcpp/state_dict/model_layout.h>

#include <torch/nn/module.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/pimpl.h>

#include <optional>
#include <vector>

namespace dcpp {

/// A module whose parameters are slices of larger tensors, split over a tensor-parallel group.
class DCPP_API TensorParallelModule {
 public:
  virtual ~TensorParallelModule() = default;
  /// The sliced parameters, named as the module names them ("weight"), each with the whole
  /// tensor's shape and where this rank's slice starts in it. Parameters not listed are whole,
  /// the same on every rank of the group.
  virtual std::vector<ParameterPlacement> sliced_parameters() const = 0;
  /// The group the parameters are split over (nullptr: this process alone), which TensorParallel
  /// checks against its tensor-parallel group. nullopt (the default): not said, not checked.
  virtual std::optional<c10::intrusive_ptr<c10d::ProcessGroup>> tensor_parallel_group() const {
    return std::nullopt;
  }
};

/// Megatron's ColumnParallelLinear: y = x A^T + b with A ([out, in]) and b split by rows (dim 0,
/// the output features) over `group`, rank r holding rows [r * out / n, (r + 1) * out / n).
/// Forward: this rank's output features (or, with `gather_output`, all of them, gathered).
/// Backward: the input's gradient summed over the group. `out` must be a multiple of the group's
/// size (CheckpointError kUsage otherwise).
class DCPP_API ColumnParallelLinearImpl : public torch::nn::Module, public TensorParallelModule {
 public:
  /// This rank's rows of `whole`'s weight and bias (copies): the layer `whole` split.
  ColumnParallelLinearImpl(const torch::nn::Linear& whole,
                           c10::intrusive_ptr<c10d::ProcessGroup> group,
                           bool gather_output = false);
  at::Tensor forward(const at::Tensor& input);
  std::vector<ParameterPlacement> sliced_parameters() const override;
  std::optional<c10::intrusive_ptr<c10d::ProcessGroup>> tensor_parallel_group() const override {
    return group_;
  }

  at::Tensor weight, bias;  // bias undefined without one

 private:
  c10::intrusive_ptr<c10d::ProcessGroup> group_;
  bool gather_output_;
  int64_t out_features_;
};
TORCH_MODULE(ColumnParallelLinear);

/// Megatron's RowParallelLinear: y = x A^T + b with A ([out, in]) split by columns (dim 1, the
/// input features) over `group` and b whole on every rank. Forward: the input is this rank's input
/// features (`input_is_parallel`, as after a ColumnParallelLinear) or is split here; the partial
/// products are summed over the group, then b is added. `in` must be a multiple of the group's
/// size.
class DCPP_API RowParallelLinearImpl : public torch::nn::Module, public TensorParallelModule {
 public:
  /// This rank's columns of `whole`'s weight, and its bias whole (copies).
  RowParallelLinearImpl(const torch::nn::Linear& whole,
                        c10::intrusive_ptr<c10d::ProcessGroup> group,
                        bool input_is_parallel = true);
  at::Tensor forward(const at::Tensor& input);
  std::vector<ParameterPlacement> sliced_parameters() const override;
  std::optional<c10::intrusive_ptr<c10d::ProcessGroup>> tensor_parallel_group() const override {
    return group_;
  }

  at::Tensor weight, bias;

 private:
  c10::intrusive_ptr<c10d::ProcessGroup> group_;
  bool input_is_parallel_;
  int64_t in_features_;
};
TORCH_MODULE(RowParallelLinear);

/// Megatron's VocabParallelEmbedding: the embedding table ([vocab, dim]) split by rows (the
/// vocabulary) over `group`. Forward: each rank looks up the ids in its rows (zeros for the
/// others) and the results are summed over the group. `vocab` must be a multiple of the group's
/// size.
class DCPP_API VocabParallelEmbeddingImpl : public torch::nn::Module, public TensorParallelModule {
 public:
  /// This rank's rows of `whole`'s table (a copy).
  VocabParallelEmbeddingImpl(const torch::nn::Embedding& whole,
                             c10::intrusive_ptr<c10d::ProcessGroup> group);
  at::Tensor forward(const at::Tensor& ids);
  std::vector<ParameterPlacement> sliced_parameters() const override;
  std::optional<c10::intrusive_ptr<c10d::ProcessGroup>> tensor_parallel_group() const override {
    return group_;
  }

  at::Tensor weight;

 private:
  c10::intrusive_ptr<c10d::ProcessGroup> group_;
  int64_t vocab_size_;
  int64_t first_id_;
};
TORCH_MODULE(VocabParallelEmbedding);

}  // namespace dcpp
