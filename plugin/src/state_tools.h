#pragma once
// State-dict walks the manager needs: counting bytes, casting for export, leaving keys out of a
// load (Stateful values are resolved by dcpp::resolve_statefuls).

#include <dcpp/state_dict/state_dict.h>

#include <c10/core/ScalarType.h>

#include <cstdint>
#include <optional>
#include <set>
#include <string>

namespace dcpp::detail {

/// Bytes of the tensors (and locally held shards) in `state`; Stateful values count as 0.
int64_t tensor_bytes(const StateDict& state);

/// A copy of `state` with floating tensors (and shards) cast to `dtype` (none: unchanged).
StateDict cast_floating(const StateDict& state, std::optional<at::ScalarType> dtype);

/// Erases from `state` every item whose flattened key (DCP's: dict keys joined with '.') is in
/// `excluded`. Returns the keys erased.
std::set<std::string> erase_keys(StateDict& state, const std::set<std::string>& excluded,
                                 const std::string& prefix = "");

/// After a load into a copy of `state` (which shares its tensors and Stateful objects, so those
/// were loaded in place): copies the plain values `loaded` holds (ints, strings, ...), which the
/// load replaced in the copy only, back into `state` at the same places. Keys `loaded` lacks (left
/// out of the load) keep their values.
void copy_loaded_values(StateDict& state, const StateDict& loaded);

}  // namespace dcpp::detail
