#pragma once
// What save returns on a rank other than the coordinator, unless it asks for the whole Metadata
// (SaveOptions::metadata_on_every_rank): the part of it this rank wrote, made from what it knows
// without a message.

#include <dcpp/format/metadata.h>
#include <dcpp/planner/plan.h>

#include <vector>

namespace dcpp::detail {

/// The keys and chunks of `plan`'s items (each tensor's properties and global size, its chunks in
/// the plan's order: only those this rank wrote), the plan's planner_data, and `results` as
/// storage_data. No storage_meta: the coordinator's storage writer makes it.
Metadata rank_metadata(const SavePlan& plan, const std::vector<WriteResult>& results);

}  // namespace dcpp::detail
