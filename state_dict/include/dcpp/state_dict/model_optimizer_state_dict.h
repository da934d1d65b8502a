#pragma once
// Model and optimizer together: DCP's `get_state_dict` / `set_state_dict`.

#include <dcpp/core/export.h>
#include <dcpp/state_dict/model_state_dict.h>
#include <dcpp/state_dict/optimizer_state_dict.h>

#include <utility>

namespace dcpp {

/// {get_model_state_dict(layout, options), get_optimizer_state_dict(layout, optimizer, options)}.
DCPP_API std::pair<StateDict, StateDict> get_state_dict(const ModelLayout& layout,
                                                        torch::optim::Optimizer& optimizer,
                                                        const StateDictOptions& options = {});

/// set_model_state_dict then set_optimizer_state_dict; returns the model's incompatible keys
/// (with strict, either one throws).
DCPP_API IncompatibleKeys set_state_dict(const ModelLayout& layout,
                                         torch::optim::Optimizer& optimizer,
                                         const StateDict& model_state_dict,
                                         const StateDict& optimizer_state_dict,
                                         const StateDictOptions& options = {});

}  // namespace dcpp
