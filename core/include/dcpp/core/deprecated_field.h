#pragma once
// Public fields kept under their old names for one minor version after they moved or were renamed
// (CHANGELOG.md; docs/design.md, "Public API tiers"): a program that assigns or reads one still
// compiles, with a deprecation warning there, and dcpp honours what it assigned. Copying the struct
// that holds one warns nobody, as a [[deprecated]] data member would (Clang warns in every
// implicit copy). One class per message, since an attribute's message must be a literal.

#include <utility>

#define DCPP_MOVED_INTO_RANKS                                                                   \
  "moved into the options' `ranks` in dcpp 0.2: use ranks.process_group and "                   \
  "ranks.coordinator_rank, or with_process_group() and with_coordinator_rank(); this old name " \
  "goes in 0.3"

#define DCPP_MOVED_INTO_RANKS_STORE                                                                \
  "moved into the options' `ranks` in dcpp 0.2 (Ranks says which ranks for every options struct: " \
  "process_group, coordinator_rank, store, rank, world_size): set ranks.store, ranks.rank and "    \
  "ranks.world_size, or call with_store() or with_rank(); this old name goes in 0.3"

#define DCPP_SKIPPED_IS_ALREADY_SAVED                                                            \
  "ManagedSave::skipped is `already_saved` since dcpp 0.2 (`skipped` says an AsyncSaveResponse " \
  "was not started because another save was in flight); this old name goes in 0.3"

/// Defines `Name<T>`: a field's old name that reads as its value and takes assignments, each use
/// warning with `message`. For dcpp: assigned() and assigned_value() (what a program assigned),
/// and set(), which fills an output field under its old name too, all without a warning.
#define DCPP_DEFINE_DEPRECATED_FIELD(Name, message)                      \
  template <typename T>                                                  \
  class Name {                                                           \
   public:                                                               \
    Name() = default;                                                    \
    [[deprecated(message)]] Name& operator=(T value) {                   \
      value_ = std::move(value);                                         \
      assigned_ = true;                                                  \
      return *this;                                                      \
    }                                                                    \
    /* Implicit on purpose: a field reads as its value. */               \
    [[deprecated(message)]] operator const T&() const { return value_; } \
    bool assigned() const { return assigned_; }                          \
    const T& assigned_value() const { return value_; }                   \
    void set(T value) { value_ = std::move(value); }                     \
                                                                         \
   private:                                                              \
    T value_{};                                                          \
    bool assigned_ = false;                                              \
  }

namespace dcpp {

/// The old name of a field of the options structs that moved into their `ranks` in 0.2
/// (`process_group`, `coordinator_rank`). Goes in 0.3.
DCPP_DEFINE_DEPRECATED_FIELD(DeprecatedField, DCPP_MOVED_INTO_RANKS);

/// The old names of the options structs' `store`, `rank` and `world_size`, which moved into their
/// `ranks` in 0.2. Go in 0.3.
DCPP_DEFINE_DEPRECATED_FIELD(DeprecatedRanksField, DCPP_MOVED_INTO_RANKS_STORE);

/// ManagedSave's `skipped`, renamed `already_saved` in 0.2. Goes in 0.3.
DCPP_DEFINE_DEPRECATED_FIELD(DeprecatedSkipped, DCPP_SKIPPED_IS_ALREADY_SAVED);

}  // namespace dcpp
