#pragma once
// Stateful objects over a model and its optimizer, so dcpp::save and dcpp::load take them
// directly (DCP's tutorial `AppState` pattern) with no hand-written adapter.

#include <dcpp/core/export.h>
#include <dcpp/state_dict/model_layout.h>
#include <dcpp/state_dict/state_dict_options.h>
#include <dcpp/state_dict/stateful.h>

#include <torch/optim/optimizer.h>

#include <memory>

namespace dcpp {

/// state_dict(): get_model_state_dict(*layout, options); load_state_dict(): set_model_state_dict.
DCPP_API std::shared_ptr<Stateful> make_model_stateful(std::shared_ptr<const ModelLayout> layout,
                                                       const StateDictOptions& options = {});

/// state_dict(): get_optimizer_state_dict; load_state_dict(): set_optimizer_state_dict.
/// `optimizer` is held by reference and must outlive the adapter.
DCPP_API std::shared_ptr<Stateful> make_optimizer_stateful(
    std::shared_ptr<const ModelLayout> layout, torch::optim::Optimizer& optimizer,
    const StateDictOptions& options = {});

/// DCP's AppState: state_dict() is {"model": model state, "optim": optimizer state} (as
/// get_state_dict returns them); load_state_dict() applies both with set_state_dict. `optimizer`
/// is held by reference and must outlive the adapter.
///
///     dcpp::StateDict state;
///     state.insert("app", dcpp::make_app_state(dcpp::plain_layout(*model), optimizer));
///     dcpp::save(state, dir);   /  dcpp::load(state, dir);
DCPP_API std::shared_ptr<Stateful> make_app_state(std::shared_ptr<const ModelLayout> layout,
                                                  torch::optim::Optimizer& optimizer,
                                                  const StateDictOptions& options = {});

}  // namespace dcpp
