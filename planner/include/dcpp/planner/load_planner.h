#pragma once
// How saved items map onto a state dict to load: DCP's `LoadPlanner`.

#include <dcpp/core/export.h>
#include <dcpp/format/metadata.h>
#include <dcpp/planner/plan.h>
#include <dcpp/state_dict/incompatible_keys.h>
#include <dcpp/state_dict/state_dict.h>

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>

#include <memory>
#include <string>
#include <vector>

namespace dcpp {

/// The load protocol, called in this order on every rank: set_up, create_local_plan,
/// [create_global_plan on the coordinator], finish_plan, then, while the storage reader reads,
/// resolve_tensor / commit_tensor per tensor read and load_bytes per bytes item. The read callbacks
/// may be called from several threads at once, for different items.
class DCPP_API LoadPlanner {
 public:
  virtual ~LoadPlanner() = default;
  virtual void set_up(StateDict& state_dict, const Metadata& metadata, bool is_coordinator) = 0;
  virtual LoadPlan create_local_plan() = 0;
  virtual std::vector<LoadPlan> create_global_plan(std::vector<LoadPlan> plans) = 0;
  virtual LoadPlan finish_plan(LoadPlan central_plan) = 0;
  /// The destination of a tensor read: a tensor of shape `item.lengths` that shares memory with the
  /// state dict's tensor (a view), or a scratch tensor the planner copies in `commit_tensor`.
  virtual at::Tensor resolve_tensor(const ReadItem& item) = 0;
  virtual void commit_tensor(const ReadItem& item, const at::Tensor& tensor) = 0;
  virtual void load_bytes(const ReadItem& item, c10::IValue value) = 0;
  /// The keys found on one side only (valid after set_up).
  virtual IncompatibleKeys report() const = 0;
};

/// DCP's `DefaultLoadPlanner`: loads every tensor of the state dict in place (intersecting its
/// local chunks with the saved chunks, so any saved sharding loads into any other) and replaces
/// non-tensor values. A key missing from the checkpoint is a CheckpointError listing every missing
/// key, unless `allow_partial_load`. Tensor dtype and global shape must match the checkpoint's
/// exactly.
///
/// Subclass it as in Python: override `lookup_tensor` / `transform_tensor` to choose where a read
/// lands, or a protocol step (`set_up` to adapt the state dict, `load_bytes`), calling this
/// class's version from yours.
class DCPP_API DefaultLoadPlanner : public LoadPlanner {
 public:
  explicit DefaultLoadPlanner(bool allow_partial_load = false);
  ~DefaultLoadPlanner() override;
  DefaultLoadPlanner(const DefaultLoadPlanner&) = delete;
  DefaultLoadPlanner& operator=(const DefaultLoadPlanner&) = delete;

  void set_up(StateDict& state_dict, const Metadata& metadata, bool is_coordinator) override;
  /// The read items that fill every local chunk of every tensor, and one per value. Throws
  /// CheckpointError: kIncompatible on missing keys (unless allow_partial_load), a tensor where
  /// the checkpoint has a value (or the reverse), another dtype or global shape; kCorrupt when
  /// the saved chunks leave part of a local chunk uncovered, naming the key and the region.
  LoadPlan create_local_plan() override;
  std::vector<LoadPlan> create_global_plan(std::vector<LoadPlan> plans) override;
  LoadPlan finish_plan(LoadPlan central_plan) override;
  /// `transform_tensor(item, lookup_tensor(item.dest_index))`, read into in place when it is on
  /// the CPU; otherwise (CUDA) a CPU scratch tensor that `commit_tensor` copies over, as DCP does
  /// (page-locked for a CUDA destination, so the copy to the device goes straight from it).
  at::Tensor resolve_tensor(const ReadItem& item) override;
  void commit_tensor(const ReadItem& item, const at::Tensor& tensor) override;
  /// Replaces the state dict's value at the item's key.
  void load_bytes(const ReadItem& item, c10::IValue value) override;
  IncompatibleKeys report() const override;

 protected:
  /// This rank's tensor that `index` names: the state dict's tensor, or its local shard at
  /// `index.offset`. Throws CheckpointError (kUsage) when it has none. Valid after
  /// create_local_plan; called from the storage reader's threads.
  virtual at::Tensor lookup_tensor(const MetadataIndex& index);
  /// Where `item` lands in `tensor`, the tensor `lookup_tensor` found: by default the view of the
  /// box at `item.dest_offsets` of sizes `item.lengths`. An override returns a tensor of those
  /// sizes and of the saved dtype. Called from the storage reader's threads.
  virtual at::Tensor transform_tensor(const ReadItem& item, const at::Tensor& tensor);

  /// What set_up was given, and the option this planner was made with.
  StateDict& state_dict() const;
  const Metadata& metadata() const;
  bool is_coordinator() const;
  bool allow_partial_load() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

/// DCP's `_EmptyStateDictLoadPlanner`: fills an empty state dict with everything the checkpoint
/// holds (tensors allocated on the CPU at their full global shape), nested back along
/// `planner_data`. With `keys`, only the flat keys that equal one of them or lie under one
/// ("model" selects "model.linear.weight"). Given a state dict that is not empty, its set_up
/// throws CheckpointError.
DCPP_API std::shared_ptr<LoadPlanner> make_empty_state_dict_load_planner(
    std::vector<std::string> keys = {});

}  // namespace dcpp
