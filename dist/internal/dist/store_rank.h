#pragma once
// This process's rank in the groups an owner of options makes from `Ranks::store` (the
// AsyncCheckpointer, the CheckpointManager).

#include <dcpp/core/checkpoint_error.h>
#include <dcpp/dist/ranks.h>

#include <algorithm>
#include <string>

namespace dcpp::detail {

/// `ranks.rank`, or 0 for -1 when there is nothing to make a group of several ranks from (one
/// process, or a group given). A store for several ranks without the rank is a CheckpointError
/// (kUsage) naming `what` (the options struct) and the field: every rank would take rank 0.
inline int rank_for_store(const Ranks& ranks, const std::string& what) {
  if (!ranks.process_group && ranks.store && ranks.world_size > 1 && ranks.rank < 0) {
    throw CheckpointError(ErrorKind::kUsage,
                          what + ": ranks.store is given for " + std::to_string(ranks.world_size) +
                              " ranks without this process's ranks.rank; use with_store(store, "
                              "rank, world_size)");
  }
  return std::max(0, ranks.rank);
}

}  // namespace dcpp::detail
