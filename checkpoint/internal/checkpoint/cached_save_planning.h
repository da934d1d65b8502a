#pragma once
// Steps 1 and 2 of save(), with or without a SavePlanCache: every rank plans what it holds, the
// coordinator merges the plans (or reuses the merge of the last committed save) and sends every
// rank its final plan.

#include "checkpoint/replicated_items.h"
#include "dist/collectives.h"

#include <dcpp/checkpoint/save_plan_cache.h>
#include <dcpp/format/metadata.h>
#include <dcpp/planner/plan.h>

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace dcpp::detail {

struct SavePlanning {
  SavePlan local;          // this rank's local plan
  std::string local_plan;  // the same, encoded
  std::string reply;       // the coordinator's reply: this rank's final plan, or its token
  Metadata metadata;       // the coordinator's: the global Metadata, without storage_data
  /// The coordinator's, when SavePlanningSteps::find_replicas is set: the items several ranks
  /// list (of this save, or of the cached one whose merge it reused).
  std::shared_ptr<const ReplicatedItems> replicated;
  /// Set by final_plan(): the positions in `local` of this rank's items that other ranks hold too.
  std::vector<std::size_t> replicated_positions;
};

struct SavePlanningSteps {
  /// This rank's local plan (the planner's, through the storage writer's prepare_local_plan).
  std::function<SavePlan()> local;
  /// The coordinator's merge of every rank's plan (the planner's create_global_plan).
  std::function<std::pair<std::vector<SavePlan>, Metadata>(std::vector<SavePlan>)> global;
  /// The storage writer's prepare_global_plan, run on every save, reused merge or not.
  std::function<std::vector<SavePlan>(std::vector<SavePlan>)> prepare_global;
  /// Whether the coordinator finds the items several ranks list (replicated_items.h), for the
  /// replica check. Part of `context` when caching: a cached merge without them is not reused.
  bool find_replicas = false;
};

/// Runs the planning steps SPMD (every rank calls it in step; a failure anywhere throws the same
/// CheckpointError on every rank, spmd_step.h). `context` names what a cached plan is valid for
/// (ranks, coordinator, planner and writer types). With a `cache`, a rank whose local plan equals
/// the one of the cache's last committed save sends a token instead; the coordinator reuses the
/// cached merge when every rank did, asks for every plan again (one more round) when only some
/// did, and sends a token instead of a final plan that did not change (final_plan() reads the
/// reply). What this save planned is kept in `cache` only by keep_save_plans(), once the save has
/// committed.
SavePlanning plan_save(Collectives& ranks, int coordinator, SavePlanCache* cache,
                       const std::string& context, const SavePlanningSteps& steps);

/// The message of a rank that offers its local plan (encoded by encode_save_plan) in full in
/// plan_save()'s first round: what a simulated rank sends a coordinator (bench/plan_cache_bench).
std::string encode_full_plan_offer(std::string encoded_local_plan);

/// This rank's final plan (before the planner's finish_plan), from the coordinator's reply or the
/// cache; sets `planning.replicated_positions`. Throws CheckpointError (kCorrupt) on a malformed
/// reply: call it inside a step of the SPMD protocol (spmd_step.h), so that every rank learns of
/// it.
SavePlan final_plan(SavePlanning& planning, SavePlanCache* cache, const std::string& context);

/// The save that plan_save() planned has committed on every rank: its plans become the cache's.
void keep_save_plans(SavePlanCache* cache);

}  // namespace dcpp::detail
