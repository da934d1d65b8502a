#pragma once
// Megatron-style tensor parallelism with data parallelism beside it (TP x DP): a model built with
// the tensor-parallel layers (tensor_parallel_layers.h) sliced over one group, replicated over
// another, described to the state-dict helpers as the unsplit model.

#include <dcpp/core/export.h>
#include <dcpp/state_dict/model_layout.h>

#include <torch/nn/module.h>

#include <memory>
#include <vector>

namespace dcpp {

/// A model whose tensor-parallel layers (ColumnParallelLinear, RowParallelLinear,
/// VocabParallelEmbedding) are sliced over `tensor_group`, its other modules whole on every rank of
/// it, and the whole replicated over `data_group` (each rank of it holds the same slices). On a
/// DeviceMesh {"dp", "tp"}: TensorParallel(model, mesh.group("tp"), mesh.group("dp")).
///
/// Training step on every rank:
///   optimizer.zero_grad();
///   loss_on_my_data_parallel_part_of_the_batch.backward();  // the layers' collectives: "tp"
///   tp.synchronize_gradients();  // every gradient: the mean over the data group
///   optimizer.step();            // an optimizer over tp.parameters()
///
/// As a ModelLayout: each layer's slices as sharded tensors of the unsplit layer's shape (a
/// ColumnParallelLinear's weight and bias by rows, a RowParallelLinear's weight by columns and its
/// bias whole, a VocabParallelEmbedding's table by rows), every other parameter and buffer whole;
/// the names are the model's own. shard_group() is the tensor group, replicate_group() the data
/// group: a full state dict reaches the rank 0 of both alone. Not thread-safe; collectives must be
/// called in the same order on every rank.
class DCPP_API TensorParallel : public ModelLayout {
 public:
  /// Collective over both groups. First the groups are checked (up to three small all-gathers):
  /// CheckpointError (kUsage) on every rank, naming the layer and the ranks, when a tensor-parallel
  /// layer of `model` that says its group (TensorParallelModule::tensor_parallel_group) was split
  /// over another group than `tensor_group` (the data-parallel group, the groups swapped), and
  /// when the ranks of `data_group` are not each the same rank of a tensor group of one size (one
  /// group given twice). Then every whole parameter and buffer from rank 0 of the tensor group,
  /// and every parameter and buffer from rank 0 of the data group, so that the replicas start
  /// equal. Throws CheckpointError (kUsage) when `model` or `tensor_group` is null, and naming the
  /// rank when a group fails. `data_group` null: no data parallelism.
  TensorParallel(std::shared_ptr<torch::nn::Module> model,
                 c10::intrusive_ptr<c10d::ProcessGroup> tensor_group,
                 c10::intrusive_ptr<c10d::ProcessGroup> data_group = {});

  torch::nn::Module& module() const { return *model_; }
  /// The parameters to give the optimizer (the model's own: this rank's slices and whole ones).
  std::vector<at::Tensor> parameters() const { return model_->parameters(); }

  /// Collective over the data group: every gradient replaced by its mean over it (a parameter
  /// without a gradient counts as zero). Nothing without a data group.
  void synchronize_gradients();

  std::vector<ParameterPlacement> placements() const override;
  c10::intrusive_ptr<c10d::ProcessGroup> process_group() const override { return tensor_group_; }
  c10::intrusive_ptr<c10d::ProcessGroup> replicate_group() const override { return data_group_; }

 private:
  std::shared_ptr<torch::nn::Module> model_;
  c10::intrusive_ptr<c10d::ProcessGroup> tensor_group_;
  c10::intrusive_ptr<c10d::ProcessGroup> data_group_;
};

}  // namespace dcpp
