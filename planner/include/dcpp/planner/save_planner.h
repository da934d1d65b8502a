#pragma once
// How a state dict becomes write items and the global Metadata: DCP's `SavePlanner`.

#include <dcpp/core/export.h>
#include <dcpp/format/metadata.h>
#include <dcpp/planner/plan.h>
#include <dcpp/state_dict/state_dict.h>

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>

#include <memory>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace dcpp {

/// The data of one write item: a CPU tensor holding exactly the item's chunk, or a value.
using WriteItemData = std::variant<at::Tensor, c10::IValue>;

/// The save protocol, called in this order on every rank (`create_global_plan` only on the
/// coordinator): set_up, create_local_plan, [create_global_plan], finish_plan, then resolve_data
/// for each item while the storage writer writes. Not thread-safe, except `resolve_data`, which
/// storage writers may call from several threads at once.
class DCPP_API SavePlanner {
 public:
  virtual ~SavePlanner() = default;
  /// `state_dict` has its Stateful objects resolved already; it outlives the save.
  virtual void set_up(StateDict& state_dict, bool is_coordinator) = 0;
  virtual SavePlan create_local_plan() = 0;
  /// Combines all ranks' plans (index = rank): removes duplicates, builds the Metadata (without
  /// storage_data, which the storage writer adds).
  virtual std::pair<std::vector<SavePlan>, Metadata> create_global_plan(
      std::vector<SavePlan> plans) = 0;
  /// Receives this rank's final plan; returns what will be written.
  virtual SavePlan finish_plan(SavePlan central_plan) = 0;
  virtual WriteItemData resolve_data(const WriteItem& item) = 0;
  /// The settings this planner's global plan depends on besides the local plans, as text: a
  /// SavePlanCache reuses a global plan only for a planner of the same type whose key is the same
  /// (on the coordinator). Empty by default, for a planner without such settings (as
  /// DefaultSavePlanner). A planner whose create_global_plan reads settings returns them all
  /// ("dedup=lowest-rank,label=nightly"); one whose global plan depends on anything else must not
  /// be given a cache (SavePlanCache).
  virtual std::string plan_cache_key() const { return {}; }
};

/// DCP's `DefaultSavePlanner`: flattens nested dicts and lists (keeping `planner_data` so keys with
/// dots survive); a chunk present on several ranks is written once, by the rank with the fewest
/// planned bytes (DCP's `dedup_save_plans`).
///
/// Subclass it as in Python: override `lookup_object` / `transform_object` to change what an item
/// writes, or a protocol step, calling this class's version from yours.
class DCPP_API DefaultSavePlanner : public SavePlanner {
 public:
  DefaultSavePlanner();
  ~DefaultSavePlanner() override;
  DefaultSavePlanner(const DefaultSavePlanner&) = delete;
  DefaultSavePlanner& operator=(const DefaultSavePlanner&) = delete;

  void set_up(StateDict& state_dict, bool is_coordinator) override;
  /// One item per tensor, per non-empty local shard, and per non-tensor leaf.
  SavePlan create_local_plan() override;
  /// Removes duplicates, checks that every tensor's chunks tile it without overlap, and builds
  /// the Metadata. Throws CheckpointError (kUsage) naming the key and ranks otherwise.
  std::pair<std::vector<SavePlan>, Metadata> create_global_plan(
      std::vector<SavePlan> plans) override;
  SavePlan finish_plan(SavePlan central_plan) override;
  /// `transform_object(item, lookup_object(item.index))`.
  WriteItemData resolve_data(const WriteItem& item) override;

 protected:
  /// What `index` names in the state dict: this rank's chunk at `index.offset` of a tensor (a
  /// plain tensor is one chunk at the origin), or a non-tensor value as it is saved. Throws
  /// CheckpointError (kUsage) when the state dict has no such key or chunk. Called from the
  /// storage writer's threads, as resolve_data is.
  virtual WriteItemData lookup_object(const MetadataIndex& index);
  /// What is written for `item`, given what `lookup_object` found: by default `object` itself.
  /// An override may change a tensor's values, not its dtype or sizes (the Metadata already
  /// records them). Called from the storage writer's threads.
  virtual WriteItemData transform_object(const WriteItem& item, WriteItemData object);

  /// The state dict given to set_up (Stateful values resolved), and whether this rank coordinates.
  const StateDict& state_dict() const;
  bool is_coordinator() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace dcpp
