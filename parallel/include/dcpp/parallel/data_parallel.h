#pragma once
// Data parallel training (DDP): every rank holds the whole model, trains on its part of the
// global batch, and the gradients are averaged over the ranks before the optimizer steps.

#include <dcpp/core/export.h>
#include <dcpp/state_dict/model_layout.h>

#include <torch/nn/module.h>

#include <memory>
#include <vector>

namespace dcpp {

/// A model replicated on every rank of `process_group`.
///
/// Training step on every rank:
///   optimizer.zero_grad();
///   loss_on_my_part_of_the_batch.backward();
///   ddp.synchronize_gradients();   // every gradient: the mean over the ranks
///   optimizer.step();              // an optimizer over ddp.parameters() (= module->parameters())
/// With the global batch split into equal parts and each rank's loss the mean over its part, the
/// averaged gradient is the gradient of the mean over the global batch.
///
/// As a ModelLayout: every parameter and buffer whole, under the module's own names (replicated,
/// so a checkpoint holds each once). Not thread-safe; collectives must be called in the same order
/// on every rank.
class DCPP_API DataParallel : public ModelLayout {
 public:
  /// Collective and blocking: broadcasts every parameter and buffer of `module` from rank 0 so
  /// that all replicas start equal. Throws CheckpointError (naming the rank) when the group fails
  /// or `module` or `process_group` is null, and (kUsage, before any collective) when `module`
  /// holds tensor-parallel layers, whose slices it would take for whole tensors: describe such a
  /// model with TensorParallel.
  DataParallel(std::shared_ptr<torch::nn::Module> module,
               c10::intrusive_ptr<c10d::ProcessGroup> process_group);

  /// The replicated model: call its forward as usual.
  torch::nn::Module& module() const { return *module_; }
  const std::shared_ptr<torch::nn::Module>& module_ptr() const { return module_; }
  /// The parameters to give the optimizer (the module's own).
  std::vector<at::Tensor> parameters() const { return module_->parameters(); }

  /// Collective and blocking: replaces the gradient of every parameter that requires grad by its
  /// mean over the ranks (one allreduce per dtype over all gradients laid end to end). A parameter
  /// without a gradient on this rank counts as zero and gets a zero gradient. Throws
  /// CheckpointError when a peer fails or times out.
  void synchronize_gradients();

  /// Collective and blocking: every buffer (running statistics, ...) from rank 0.
  void broadcast_buffers();

  std::vector<ParameterPlacement> placements() const override;
  c10::intrusive_ptr<c10d::ProcessGroup> process_group() const override { return group_; }

 private:
  std::shared_ptr<torch::nn::Module> module_;
  c10::intrusive_ptr<c10d::ProcessGroup> group_;
};

}  // namespace dcpp
