#pragma once
// The items of several ranks' save plans that name one index (key and chunk offsets): what the
// coordinator's dedup and the replica check both need, found once per item by a sort.

#include <dcpp/planner/plan.h>

#include <cstdint>
#include <vector>

namespace dcpp::detail {

/// The items of `plans` numbered in plan order: rank 0's first, then on; rank r's item i is
/// number `first_of_rank[r] + i`.
struct SameIndexItems {
  static constexpr uint32_t kAlone = UINT32_MAX;

  std::vector<const MetadataIndex*> index_of;  // by number: into the plans, which must outlive it
  std::vector<uint32_t> first_of_rank;
  /// By number: the first item in plan order with this item's index (itself for that first one),
  /// where more than one item has it; kAlone where one item alone has it.
  std::vector<uint32_t> leader;
  bool any = false;  // whether any index is held more than once

  uint32_t number(std::size_t rank, std::size_t item) const {
    return first_of_rank[rank] + static_cast<uint32_t>(item);
  }
};

/// Each item as a 16-byte record (a hash of its index, its number), sorted: equal indices end up
/// side by side, each group led by its first in plan order. Not a node per item in a hash map: a
/// million chunks (1,024 ranks) take a fraction of a second. Throws CheckpointError (kUsage) for
/// 2^32 items or more.
SameIndexItems find_same_index_items(const std::vector<SavePlan>& plans);

}  // namespace dcpp::detail
