#pragma once
// Checking that the ranks' plans together describe whole tensors, before anything is written.

#include <dcpp/planner/plan.h>

#include <vector>

namespace dcpp::detail {

/// `plans[r]` is rank r's plan, duplicates already removed. Throws CheckpointError, naming the key
/// and the ranks involved, when ranks disagree on a tensor's global shape or dtype, when a chunk
/// lies outside its tensor, when two chunks overlap, or when the chunks leave part of a tensor
/// uncovered. As in DCP, coverage is not required of a single plan: one process saving alone
/// (a save without collectives) may hold only part of a sharded tensor.
void validate_global_save_plan(const std::vector<SavePlan>& plans);

/// Megatron-Core's validate_access_integrity for tensors: `plans[r]` lists what rank r saves or
/// loads, replicas not removed. A replica is a chunk of the same key with the same offsets and
/// sizes as another (on any rank, this one included), and counts once; two chunks at the same
/// offsets with different sizes overlap. Checks what validate_global_save_plan checks, every
/// tensor covered whatever the number of plans.
void validate_tensor_access(const std::vector<SavePlan>& plans);

}  // namespace dcpp::detail
