#pragma once
// A public field kept under its old name for one minor version after it moved (CHANGELOG.md;
// docs/design.md, "Public API tiers"): a program that assigns or reads it still compiles, with a
// deprecation warning there, and dcpp honours what it assigned. Copying the struct that holds one
// warns nobody, as a [[deprecated]] data member would (Clang warns in every implicit copy).

#include <utility>

#define DCPP_MOVED_INTO_RANKS                                                                   \
  "moved into the options' `ranks` in dcpp 0.2: use ranks.process_group and "                   \
  "ranks.coordinator_rank, or with_process_group() and with_coordinator_rank(); this old name " \
  "goes in 0.3"

namespace dcpp {

/// The old name of a field of the options structs that moved into their `ranks` in 0.2
/// (`process_group`, `coordinator_rank`). Goes in 0.3.
template <typename T>
class DeprecatedField {
 public:
  DeprecatedField() = default;

  [[deprecated(DCPP_MOVED_INTO_RANKS)]] DeprecatedField& operator=(T value) {
    value_ = std::move(value);
    assigned_ = true;
    return *this;
  }
  // Implicit on purpose: a field reads as its value.
  [[deprecated(DCPP_MOVED_INTO_RANKS)]] operator const T&() const { return value_; }

  /// For dcpp, which folds the value into the new field: whether the program assigned it, and
  /// what (no warning).
  bool assigned() const { return assigned_; }
  const T& assigned_value() const { return value_; }

 private:
  T value_{};
  bool assigned_ = false;
};

}  // namespace dcpp
