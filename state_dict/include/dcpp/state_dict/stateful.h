#pragma once
// Objects that checkpoint themselves: DCP's `Stateful` protocol.

#include <dcpp/core/export.h>
#include <dcpp/state_dict/state_dict.h>

#include <string>

namespace dcpp {

/// Anything whose state is saved through a state dict of its own: a model, an optimizer, a data
/// loader position, a user object. `save` calls `state_dict()` and saves what it returns; `load`
/// calls `state_dict()` to learn what to load, loads into that dict in place (tensors are copied
/// into the tensors it holds, other values replaced), then passes it to `load_state_dict()`.
class DCPP_API Stateful {
 public:
  virtual ~Stateful() = default;
  virtual StateDict state_dict() = 0;
  virtual void load_state_dict(const StateDict& state_dict) = 0;

  /// Whether a checkpoint may lack `key`, a leaf of state_dict() named as DCP flattens it below
  /// this object ("param_groups.0.decoupled_weight_decay"): for state whose keys grew between
  /// versions of its writer. A strict `load` drops such a key from the dict it loads into when
  /// the checkpoint lacks it, instead of failing, so load_state_dict() sees it absent; present,
  /// it loads as any key. Default: false for every key. Called during load, on the loading thread.
  virtual bool may_be_missing(const std::string& key) const {
    (void)key;
    return false;
  }
};

}  // namespace dcpp
