#pragma once
// Pipeline parallel training: each rank owns a contiguous slice of a Sequential model; activations
// flow forward from rank to rank, their gradients flow back.

#include <dcpp/core/export.h>
#include <dcpp/state_dict/model_layout.h>

#include <ATen/core/Tensor.h>
#include <torch/nn/modules/container/sequential.h>

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace dcpp {

/// One stage of a pipeline over the ranks of `process_group`: rank r is stage r and holds modules
/// [first_index, first_index + stage_modules->size()) of the whole Sequential. Stage r receives its
/// input from stage r - 1 and sends its output to stage r + 1.
///
/// Training step on every rank (one or more micro-batches; forward() and backward() calls must be
/// made in the same order on every stage, and backward() takes the micro-batches first in, first
/// out):
///   optimizer.zero_grad();                       // an optimizer over stage.parameters()
///   at::Tensor out = stage.forward(batch);       // first stage: the batch; others: ignored
///   at::Tensor loss = stage.is_last() ? loss_fn(out, target) : at::Tensor();
///   stage.backward(loss);                        // last stage: the loss; others: ignored
///   optimizer.step();
///
/// Names: stage-local FQNs "<i>.<rest>" are the whole model's "<first_index + i>.<rest>" (stage 1
/// of a 4-module model split 2 + 2 has local "0.weight", global "2.weight").
///
/// As a ModelLayout: only this stage's parameters and buffers, under their global FQNs (whole, or
/// as the layout within the stage holds them); the stages together list every tensor of the model
/// once; stage_group() is the pipeline's group. Not thread-safe; stage-to-stage messages use tags
/// 0-3 of the process group.
class DCPP_API PipelineStage : public ModelLayout {
 public:
  /// Local (no communication): `stage_modules` becomes stage `process_group->getRank()`. Throws
  /// CheckpointError when the module or group is null or `first_index` is negative, and when the
  /// modules hold tensor-parallel layers (their layout must be given: the constructor below).
  PipelineStage(torch::nn::Sequential stage_modules, int64_t first_index,
                c10::intrusive_ptr<c10d::ProcessGroup> process_group);

  /// A stage whose modules are themselves parallel over other ranks (FSDP x PP, TP x DP x PP on a
  /// DeviceMesh): `within` describes `stage_modules` alone, under their stage-local names
  /// (FullyShardedDataParallel or TensorParallel over the stage's modules and the groups of the
  /// other mesh dimensions). placements() are its placements under the global names, and
  /// shard_group() and replicate_group() are its groups. The stage keeps `within` alive; the
  /// optimizer steps what `within` says (FullyShardedDataParallel::parameters(): its shards).
  /// Throws CheckpointError (kUsage) as above, or when `within` is null.
  PipelineStage(torch::nn::Sequential stage_modules, int64_t first_index,
                c10::intrusive_ptr<c10d::ProcessGroup> process_group,
                std::shared_ptr<const ModelLayout> within);

  /// Modules [begin, end) of `whole` as a Sequential of their own (sharing the modules).
  static torch::nn::Sequential slice(const torch::nn::Sequential& whole, int64_t begin,
                                     int64_t end);
  /// The modules [begin, end) of `num_modules` that stage `stage` of `num_stages` owns: the
  /// even split (the first num_modules % num_stages stages one module more).
  static std::pair<int64_t, int64_t> even_bounds(int64_t num_modules, int stage, int num_stages);

  /// Collective between neighbours, blocking. The first stage runs its modules on `input`; the
  /// others receive their input (any shape, any floating dtype) from the previous stage and ignore
  /// `input`. Every stage but the last sends its output on. Returns this stage's output (the
  /// model's output on the last stage). Throws CheckpointError naming the rank and peer when a
  /// neighbour fails or times out.
  at::Tensor forward(const at::Tensor& input);

  /// Collective between neighbours, blocking: the backward pass of the oldest micro-batch not yet
  /// backpropagated. The last stage calls `loss.backward()` (`loss` computed from what forward()
  /// returned); the others receive the gradient of their output from the next stage (and ignore
  /// `loss`). Every stage but the first sends the gradient of its input back. Throws
  /// CheckpointError when there is no forward() to match or a neighbour fails.
  void backward(const at::Tensor& loss);

  int stage() const { return group_->getRank(); }
  int num_stages() const { return group_->getSize(); }
  bool is_first() const { return stage() == 0; }
  bool is_last() const { return stage() == num_stages() - 1; }
  int64_t first_index() const { return first_index_; }

  const torch::nn::Sequential& modules() const { return modules_; }
  std::vector<at::Tensor> parameters() const { return modules_->parameters(); }
  /// "<first_index + i>.<rest>" for the stage-local name "<i>.<rest>".
  std::string global_name(const std::string& local_name) const;

  /// Collective over all stages, blocking: `value` as the last stage computed it (e.g. the loss),
  /// broadcast to every stage. `value` must have the same shape and dtype on every stage.
  at::Tensor broadcast_from_last(at::Tensor value) const;

  std::vector<ParameterPlacement> placements() const override;
  /// The pipeline's group: the stages own disjoint FQNs.
  c10::intrusive_ptr<c10d::ProcessGroup> process_group() const override { return group_; }
  /// The pipeline's group: a full state dict is the union of the stages'.
  c10::intrusive_ptr<c10d::ProcessGroup> stage_group() const override { return group_; }
  /// Without a layout within: none (nothing is sharded); else that layout's.
  c10::intrusive_ptr<c10d::ProcessGroup> shard_group() const override {
    return within_ ? within_->shard_group() : c10::intrusive_ptr<c10d::ProcessGroup>();
  }
  c10::intrusive_ptr<c10d::ProcessGroup> replicate_group() const override {
    return within_ ? within_->replicate_group() : c10::intrusive_ptr<c10d::ProcessGroup>();
  }

 private:
  struct InFlight {
    at::Tensor input;   // received from the previous stage (requires grad), or the batch
    at::Tensor output;  // what this stage computed
  };

  torch::nn::Sequential modules_;
  int64_t first_index_;
  c10::intrusive_ptr<c10d::ProcessGroup> group_;
  std::shared_ptr<const ModelLayout> within_;
  std::deque<InFlight> in_flight_;
};

}  // namespace dcpp
