#pragma once
// Plan caching for periodic saves: DCP's `DefaultSavePlanner(enable_plan_caching=True)`, as a
// cache handed to save() rather than state kept in the planner's class.

#include <dcpp/core/export.h>

#include <cstdint>
#include <memory>

namespace dcpp {

/// What one rank keeps from a save so that the next save of a state with the same structure
/// skips the global planning: the coordinator reuses the last global plan and Metadata, and the
/// plans do not travel. Give every save of a series the same cache on each rank
/// (SaveOptions::plan_cache); the CheckpointManager does unless told not to.
///
/// Each rank compares its local plan with the one it sent in the last save that committed; when
/// they are equal it sends that save's token (8 bytes) instead of its plan. When every rank sends
/// the token of the coordinator's own last committed save, the coordinator reuses that save's
/// global plan and Metadata, and a rank whose final plan came out as before receives a token in
/// place of it. Any other case (a tensor added, resized or resharded on any rank, another dtype,
/// world size, coordinator, planner or storage writer type, planner settings as
/// SavePlanner::plan_cache_key gives them, a rank whose cache missed a save)
/// plans globally from every rank's full plan, as a save without a cache does, at the cost of one
/// more gather when some ranks had sent tokens. A save that fails leaves the cache as it was.
/// Values never matter: only keys, shapes, dtypes and shards do.
///
/// Assumes that the planner's global plan depends on the local plans and its plan_cache_key()
/// alone, as DefaultSavePlanner's does; a planner whose global plan changes with anything else
/// must not be given a cache. Costs the coordinator a copy of the global plan, every rank's final
/// plan and the Metadata (about twice the `.metadata` file), and each rank a copy of its own plans.
/// Not thread-safe: saves share a cache one at a time.
class DCPP_API SavePlanCache {
 public:
  SavePlanCache();
  ~SavePlanCache();
  SavePlanCache(const SavePlanCache&) = delete;
  SavePlanCache& operator=(const SavePlanCache&) = delete;

  /// Committed saves through this cache whose global plan was reused, and those planned in full.
  int64_t reused_plans() const;
  int64_t full_plans() const;

  struct State;  // checkpoint/src/save_plan_cache_state.h
  State& state() { return *state_; }

 private:
  std::unique_ptr<State> state_;
};

}  // namespace dcpp
