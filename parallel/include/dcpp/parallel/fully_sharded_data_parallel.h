#pragma once
// Fully sharded data parallel training (FSDP): each rank stores only a dim-0 shard of every
// parameter; the full parameters are gathered for forward and backward, the gradients reduced to
// the shards, and the optimizer steps the shards.

#include <dcpp/core/export.h>
#include <dcpp/parallel/dim0_split.h>
#include <dcpp/state_dict/model_layout.h>

#include <torch/nn/module.h>

#include <memory>
#include <string>
#include <vector>

namespace dcpp {

/// A model whose parameters are split by rows over the ranks of `process_group`.
///
/// Parameter `p` with R rows is split as dim0_split(R, rank, world): near-equal row ranges, the
/// first R % world ranks one row longer; a rank may hold zero rows (ShardedTensor::from_chunk_of's
/// split). Parameters without rows (0-dim, or empty) and all buffers are replicated instead.
///
/// Training step on every rank:
///   optimizer.zero_grad();                    // an optimizer over fsdp.parameters(): the shards
///   fsdp.gather_parameters();                 // the module's parameters: full tensors
///   loss_on_my_part_of_the_batch.backward();  // full gradients, from this rank's data
///   fsdp.reduce_gradients();                  // shard.grad += rows of the mean over the ranks;
///                                             // the full parameters are released
///   optimizer.step();
///
/// Between reduce_gradients() (or construction) and the next gather_parameters(), the module's
/// parameters are empty placeholders (shape {0}): only the shards hold the model then.
///
/// Hybrid sharding (HSDP, torch's HYBRID_SHARD on a 2-D mesh {"replicate", "shard"}): with a
/// `replicate_group`, the model is sharded over `process_group` as above and the shards are
/// replicated over `replicate_group` (each of its ranks holds the same rows); reduce_gradients()
/// then averages over both groups. On a DeviceMesh: FullyShardedDataParallel(module,
/// mesh.group("shard"), mesh.group("replicate")).
///
/// As a ModelLayout: sharded parameters as their shard (local) with global_shape and offsets
/// {first row, 0, ...}; replicated ones and buffers whole; shard_group() is `process_group`,
/// replicate_group() `replicate_group`. Not thread-safe; collectives must be called in the same
/// order on every rank.
class DCPP_API FullyShardedDataParallel : public ModelLayout {
 public:
  /// Collective and blocking: broadcasts the parameters and buffers of `module` from rank 0 (of
  /// `process_group`, then of `replicate_group`), keeps this rank's rows of each parameter as a
  /// new leaf tensor (its shard, requiring grad as the parameter does) and releases the full
  /// parameters. Throws CheckpointError naming the rank when a group fails or `module` or
  /// `process_group` is null; (kUsage, before any collective) when `module` holds
  /// tensor-parallel layers; and (kUsage, on every rank, after one all-gather over it) when the
  /// ranks of `replicate_group` are not each the same rank of a shard group of one size (one group
  /// given twice).
  FullyShardedDataParallel(std::shared_ptr<torch::nn::Module> module,
                           c10::intrusive_ptr<c10d::ProcessGroup> process_group,
                           c10::intrusive_ptr<c10d::ProcessGroup> replicate_group = {});

  torch::nn::Module& module() const { return *module_; }
  const std::shared_ptr<torch::nn::Module>& module_ptr() const { return module_; }

  /// The tensors the optimizer steps: each parameter's shard (the parameter itself when
  /// replicated), in the module's order.
  std::vector<at::Tensor> parameters() const;

  /// Collective and blocking: all-gathers every shard (one allgather per dtype, shards padded to
  /// the longest) and makes each module parameter the full tensor, with no gradient. Throws
  /// CheckpointError when a peer fails or times out.
  void gather_parameters();

  /// Collective and blocking: all-reduces the full gradients (a parameter without one counts as
  /// zero), divides by the world size (with a replicate group: averages this rank's rows again
  /// over it) and adds this rank's rows to each shard's gradient (replicated parameters: replaces
  /// their gradient by the mean); then releases the full parameters. Gloo in libtorch 1.13 has no
  /// reduce_scatter, hence allreduce and slice. Throws CheckpointError when the parameters are not
  /// gathered or a peer fails.
  void reduce_gradients();

  /// Local: makes the module's sharded parameters empty placeholders again, dropping their
  /// gradients (e.g. after an evaluation forward that needs no backward).
  void release_parameters();

  /// Whether the module's parameters are the gathered full tensors now.
  bool gathered() const { return gathered_; }

  std::vector<ParameterPlacement> placements() const override;
  c10::intrusive_ptr<c10d::ProcessGroup> process_group() const override { return group_; }
  c10::intrusive_ptr<c10d::ProcessGroup> replicate_group() const override {
    return replicate_group_;
  }

 private:
  struct Entry {
    std::string fqn;
    at::Tensor module_tensor;  // the module's parameter or buffer
    at::Tensor shard;          // what this rank holds (module_tensor itself when not sharded)
    std::vector<int64_t> global_shape;
    RowRange rows;  // this rank's rows, when sharded
    bool sharded = false;
    bool is_buffer = false;
  };

  std::shared_ptr<torch::nn::Module> module_;
  c10::intrusive_ptr<c10d::ProcessGroup> group_;
  c10::intrusive_ptr<c10d::ProcessGroup> replicate_group_;
  std::vector<Entry> entries_;
  bool gathered_ = false;
};

}  // namespace dcpp
