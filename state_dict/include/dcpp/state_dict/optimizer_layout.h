#pragma once
// The two layouts of an optimizer state dict, as DCP has them: nested (get_optimizer_state_dict's
// default, Python's `optimizer.state_dict()` keyed by FQN) and flat (DCP's
// `_flatten_optim_state_dict`, what pipeline stages save). set_optimizer_state_dict reads either,
// and dcpp::load gives a target the layout its checkpoint has (docs/state_dict.md, "Nested or
// flat").

#include <dcpp/core/export.h>
#include <dcpp/state_dict/state_dict.h>

#include <string>

namespace dcpp {

enum class OptimizerLayout {
  kNone,    ///< not an optimizer state dict
  kNested,  ///< {"state": {fqn: {name: value}}, "param_groups": [{..., "params": [fqn, ...]}]}
  kFlat,    ///< {"state.<fqn>.<name>": value, "param_groups.<fqn>.<option>": value}
};

/// Which layout `state_dict` has: kNested when it is exactly "state" (a dict of dicts) and
/// "param_groups" (a list of dicts, each with "params"); kFlat when every key starts with "state."
/// or "param_groups." and one at least with "param_groups."; kNone otherwise.
DCPP_API OptimizerLayout optimizer_layout_of(const StateDict& state_dict);

/// "nested", "flat", "not an optimizer state dict".
DCPP_API const char* to_string(OptimizerLayout layout);

/// The nested optimizer state dict `nested` in the flat layout: "state.<fqn>.<name>" for each
/// state value and "param_groups.<fqn>.<option>" for each option of each parameter's group (every
/// option repeated per parameter, so that each process's keys stand alone). Values are shared, not
/// copied (a tensor is the same tensor). Throws CheckpointError (kIncompatible) naming the key when
/// `nested` is not in the nested layout.
DCPP_API StateDict flatten_optimizer_state_dict(const StateDict& nested);

}  // namespace dcpp
