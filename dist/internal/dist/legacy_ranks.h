#pragma once
// The fields the options structs had before Ranks (0.1: `process_group` and `coordinator_rank` in
// SaveOptions, LoadOptions, AsyncCheckpointerOptions and CheckpointManagerOptions), kept for 0.2
// as deprecated aliases (DeprecatedField) of `ranks.process_group` and `ranks.coordinator_rank`,
// and folded into `ranks` where dcpp takes the options. Removed in 0.3 (CHANGELOG.md).

#include <dcpp/core/checkpoint_error.h>

#include <string>

namespace dcpp::detail {

/// `options` with what a program assigned to its deprecated `process_group` and
/// `coordinator_rank` (DeprecatedField) moved into `ranks`. An assigned value is taken when
/// `ranks` leaves that field at its default (null, 0); when `ranks` sets it to another value, it
/// is a CheckpointError (kUsage) naming `what` and the field.
template <typename Options>
Options fold_legacy_ranks(Options options, const std::string& what) {
  if (options.process_group.assigned()) {
    const auto& old_group = options.process_group.assigned_value();
    if (options.ranks.process_group && options.ranks.process_group != old_group) {
      throw CheckpointError(ErrorKind::kUsage,
                            what +
                                ": process_group (deprecated) and ranks.process_group name "
                                "different groups; set ranks.process_group alone");
    }
    options.ranks.process_group = old_group;
  }
  if (options.coordinator_rank.assigned()) {
    const int old_rank = options.coordinator_rank.assigned_value();
    if (options.ranks.coordinator_rank != 0 && options.ranks.coordinator_rank != old_rank) {
      throw CheckpointError(ErrorKind::kUsage, what + ": coordinator_rank (deprecated) is " +
                                                   std::to_string(old_rank) +
                                                   " and ranks.coordinator_rank " +
                                                   std::to_string(options.ranks.coordinator_rank) +
                                                   "; set ranks.coordinator_rank alone");
    }
    options.ranks.coordinator_rank = old_rank;
  }
  options.process_group = decltype(options.process_group)();  // unassigned again
  options.coordinator_rank = decltype(options.coordinator_rank)();
  return options;
}

}  // namespace dcpp::detail
