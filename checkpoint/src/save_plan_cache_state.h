#pragma once
// What a SavePlanCache holds: the plans of the last committed save, and those of the save in
// progress until it commits (cached_save_planning.h).

#include "checkpoint/replicated_items.h"

#include <dcpp/checkpoint/save_plan_cache.h>
#include <dcpp/format/metadata.h>
#include <dcpp/planner/plan.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace dcpp {

struct SavePlanCache::State {
  /// The plans of one save, as this rank saw them.
  struct Plans {
    /// The ranks, this rank, the coordinator, the planner's type and plan_cache_key() and the
    /// writer's type: a save in another context never reuses these plans.
    std::string context;
    /// The coordinator's name for the save; 0 when nothing is kept.
    uint64_t token = 0;
    /// This rank's local plan, encoded as sent, and the final plan it received (before the
    /// planner's finish_plan).
    std::string local_plan;
    SavePlan final_plan;
    /// Whether the save reused the global plan of the one before.
    bool reused = false;
    /// The coordinator only: the planner's global plans (before the storage writer's
    /// prepare_global_plan) and Metadata (without storage_data), and each rank's final plan,
    /// encoded as sent.
    std::shared_ptr<const std::vector<SavePlan>> global_plans;
    std::shared_ptr<const Metadata> metadata;
    std::vector<std::string> final_plans;
    /// The coordinator only, with the replica check: the items several ranks list.
    std::shared_ptr<const detail::ReplicatedItems> replicated;
  };

  Plans kept;     // the last committed save's
  Plans pending;  // the save in progress: kept once it commits
  int64_t reused_plans = 0;
  int64_t full_plans = 0;
};

}  // namespace dcpp
