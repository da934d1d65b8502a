#pragma once
// All-or-nothing loads (LoadOptions::all_or_nothing): the state is read into scratch copies of the
// targets, and copied into the targets only once every rank has read and verified everything.

#include <dcpp/state_dict/state_dict.h>

namespace dcpp::detail {

/// A copy of `targets` whose every tensor (and sharded tensor's local shard) is a clone of the
/// target's, on its device: the loader fills it as it would the targets. Cloned, not left empty,
/// so what the checkpoint does not cover (a partial load) still holds the target's values.
StateDict make_load_scratch(const StateDict& targets);

/// Copies what a load left in `scratch` into `targets`: tensors through copy_ into the targets'
/// own storage (a model's parameters stay the same tensors), other values replaced, entries the
/// targets lack inserted.
void apply_loaded_scratch(StateDict& targets, const StateDict& scratch);

}  // namespace dcpp::detail
