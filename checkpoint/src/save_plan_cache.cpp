#include <dcpp/checkpoint/save_plan_cache.h>

#include "save_plan_cache_state.h"

namespace dcpp {

SavePlanCache::SavePlanCache() : state_(std::make_unique<State>()) {}
SavePlanCache::~SavePlanCache() = default;

int64_t SavePlanCache::reused_plans() const { return state_->reused_plans; }
int64_t SavePlanCache::full_plans() const { return state_->full_plans; }

}  // namespace dcpp
