#pragma once
// Stateful adapters for the rest of a training loop's state: RNG, counters (data-loader
// position), anything with a getter and a setter.

#include <dcpp/core/export.h>
#include <dcpp/state_dict/stateful.h>

#include <cstdint>
#include <functional>
#include <memory>

namespace dcpp {

/// The default CPU generator's state (torch::manual_seed's), as {"cpu": uint8 tensor}; loading
/// sets the generator back, so random draws continue as in the uninterrupted run.
DCPP_API std::shared_ptr<Stateful> make_rng_stateful();

/// An integer the loop owns (e.g. the data loader's position or epoch), as {"value": int}.
/// `value` must outlive the adapter.
DCPP_API std::shared_ptr<Stateful> make_counter_stateful(int64_t& value);

/// Any state with a getter and a setter (e.g. an LR scheduler's step count).
DCPP_API std::shared_ptr<Stateful> make_function_stateful(
    std::function<StateDict()> get, std::function<void(const StateDict&)> set);

}  // namespace dcpp
