#pragma once
// Stateful adapters: a training loop's state as Stateful objects, so dcpp::save and dcpp::load
// (and the CheckpointManager's TrainingContext) take it directly, with no hand-written class
// (DCP's tutorial `AppState` pattern). All are named make_<what>_stateful, and each shares what it
// reads and writes (a layout, an optimizer, a counter) or owns it (a getter and a setter), so
// nothing it points at can die first.

#include <dcpp/core/export.h>
#include <dcpp/state_dict/model_layout.h>
#include <dcpp/state_dict/state_dict_options.h>
#include <dcpp/state_dict/stateful.h>

#include <torch/optim/optimizer.h>

#include <cstdint>
#include <functional>
#include <memory>

namespace dcpp {

/// The model: state_dict() is get_model_state_dict(*layout, options); load_state_dict() is
/// set_model_state_dict.
DCPP_API std::shared_ptr<Stateful> make_model_stateful(std::shared_ptr<const ModelLayout> layout,
                                                       const StateDictOptions& options = {});

/// The optimizer: state_dict() is get_optimizer_state_dict; load_state_dict() is
/// set_optimizer_state_dict.
DCPP_API std::shared_ptr<Stateful> make_optimizer_stateful(
    std::shared_ptr<const ModelLayout> layout, std::shared_ptr<torch::optim::Optimizer> optimizer,
    const StateDictOptions& options = {});

/// DCP's AppState: state_dict() is {"model": model state, "optim": optimizer state} (as
/// get_state_dict returns them); load_state_dict() applies both with set_state_dict.
///
///     auto optimizer = std::make_shared<torch::optim::Adam>(model->parameters());
///     dcpp::StateDict state;
///     state.insert("app", dcpp::make_app_stateful(dcpp::plain_layout(*model), optimizer));
///     dcpp::save(state, dir);   /  dcpp::load(state, dir);
DCPP_API std::shared_ptr<Stateful> make_app_stateful(
    std::shared_ptr<const ModelLayout> layout, std::shared_ptr<torch::optim::Optimizer> optimizer,
    const StateDictOptions& options = {});

/// The default CPU generator's state (torch::manual_seed's), as {"cpu": uint8 tensor}; loading
/// sets the generator back, so random draws continue as in the uninterrupted run.
DCPP_API std::shared_ptr<Stateful> make_rng_stateful();

/// An integer the loop keeps (the data loader's position, the epoch), as {"value": int}; the
/// loop and the adapter share it:
///
///     auto samples_seen = std::make_shared<int64_t>(0);
///     context.add("data_loader", dcpp::make_counter_stateful(samples_seen));
DCPP_API std::shared_ptr<Stateful> make_counter_stateful(std::shared_ptr<int64_t> value);

/// Any state with a getter and a setter (an LR scheduler's step count), which the adapter owns:
/// what they capture by reference must outlive it.
DCPP_API std::shared_ptr<Stateful> make_function_stateful(
    std::function<StateDict()> get, std::function<void(const StateDict&)> set);

#define DCPP_ADAPTER_HOLDS_A_REFERENCE                                                           \
  "this overload holds a reference the adapter may outlive; since dcpp 0.2 the adapters share "  \
  "what "                                                                                        \
  "they point at: pass a std::shared_ptr (make_app_stateful for make_app_state); this overload " \
  "goes in 0.3"

/// Deprecated in 0.2, removed in 0.3: `optimizer` is held by reference and must outlive the
/// adapter.
[[deprecated(DCPP_ADAPTER_HOLDS_A_REFERENCE)]] DCPP_API std::shared_ptr<Stateful>
make_optimizer_stateful(std::shared_ptr<const ModelLayout> layout,
                        torch::optim::Optimizer& optimizer, const StateDictOptions& options = {});
/// Deprecated in 0.2, removed in 0.3: make_app_stateful, with `optimizer` held by reference.
[[deprecated(DCPP_ADAPTER_HOLDS_A_REFERENCE)]] DCPP_API std::shared_ptr<Stateful> make_app_state(
    std::shared_ptr<const ModelLayout> layout, torch::optim::Optimizer& optimizer,
    const StateDictOptions& options = {});
/// Deprecated in 0.2, removed in 0.3: `value` is held by reference and must outlive the adapter.
[[deprecated(DCPP_ADAPTER_HOLDS_A_REFERENCE)]] DCPP_API std::shared_ptr<Stateful>
make_counter_stateful(int64_t& value);

}  // namespace dcpp
