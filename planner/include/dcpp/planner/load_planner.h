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
DCPP_API std::shared_ptr<LoadPlanner> make_default_load_planner(bool allow_partial_load = false);

/// DCP's `_EmptyStateDictLoadPlanner`: fills an empty state dict with everything the checkpoint
/// holds (tensors allocated on the CPU at their full global shape), nested back along
/// `planner_data`. With `keys`, only the flat keys that equal one of them or lie under one
/// ("model" selects "model.linear.weight"). Given a state dict that is not empty, its set_up
/// throws CheckpointError.
DCPP_API std::shared_ptr<LoadPlanner> make_empty_state_dict_load_planner(
    std::vector<std::string> keys = {});

}  // namespace dcpp
