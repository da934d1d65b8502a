#pragma once
// The fields the options structs had before Ranks (0.1: `process_group` and `coordinator_rank` in
// SaveOptions, LoadOptions, AsyncCheckpointerOptions and CheckpointManagerOptions; `rank` in
// SaveOptions; `store`, `rank` and `world_size` in AsyncCheckpointerOptions and
// CheckpointManagerOptions), kept for 0.2 as deprecated aliases (DeprecatedField,
// DeprecatedRanksField) of the fields of `ranks`, and folded into `ranks` where dcpp takes the
// options. Removed in 0.3 (CHANGELOG.md).

#include <dcpp/core/checkpoint_error.h>
#include <dcpp/dist/ranks.h>

#include <string>
#include <type_traits>
#include <utility>

namespace dcpp::detail {

template <typename Options, typename = void>
struct HasLegacyRank : std::false_type {};
template <typename Options>
struct HasLegacyRank<Options, std::void_t<decltype(std::declval<Options&>().rank.assigned())>>
    : std::true_type {};

template <typename Options, typename = void>
struct HasLegacyStore : std::false_type {};
template <typename Options>
struct HasLegacyStore<Options, std::void_t<decltype(std::declval<Options&>().store.assigned())>>
    : std::true_type {};

// Moves what a program assigned to `old` into `now`, which must be `unset` or the same; else a
// CheckpointError (kUsage) naming `what` and the field.
template <typename Old, typename T>
void fold_legacy_field(Old& old, T& now, const T& unset, const std::string& what,
                       const std::string& name) {
  if (!old.assigned()) return;
  if (now != unset && now != old.assigned_value()) {
    throw CheckpointError(ErrorKind::kUsage, what + ": " + name + " (deprecated) and ranks." +
                                                 name + " differ; set ranks." + name + " alone");
  }
  now = old.assigned_value();
  old = Old();  // unassigned again
}

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
  if constexpr (HasLegacyRank<Options>::value) {
    fold_legacy_field(options.rank, options.ranks.rank, -1, what, "rank");
  }
  if constexpr (HasLegacyStore<Options>::value) {
    fold_legacy_field(options.store, options.ranks.store, c10::intrusive_ptr<c10d::Store>(), what,
                      "store");
    fold_legacy_field(options.world_size, options.ranks.world_size, 1, what, "world_size");
  }
  return options;
}

}  // namespace dcpp::detail
