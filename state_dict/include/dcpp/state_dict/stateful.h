#pragma once
// Objects that checkpoint themselves: DCP's `Stateful` protocol.

#include <dcpp/state_dict/state_dict.h>

namespace dcpp {

/// Anything whose state is saved through a state dict of its own: a model, an optimizer, a data
/// loader position, a user object. `save` calls `state_dict()` and saves what it returns; `load`
/// calls `state_dict()` to learn what to load, loads into that dict in place (tensors are copied
/// into the tensors it holds, other values replaced), then passes it to `load_state_dict()`.
class Stateful {
 public:
  virtual ~Stateful() = default;
  virtual StateDict state_dict() = 0;
  virtual void load_state_dict(const StateDict& state_dict) = 0;
};

}  // namespace dcpp
