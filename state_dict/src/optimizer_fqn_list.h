#pragma once
// A param group's "params": the FQNs it lists, in either form a state dict holds them.

#include <dcpp/state_dict/state_dict.h>

#include <string>
#include <vector>

namespace dcpp::detail {

/// The strings of `value`, a list of strings (a StateList of string values, or a string list
/// IValue); CheckpointError (kIncompatible) naming `key` otherwise.
std::vector<std::string> optimizer_fqn_list(const StateValue& value, const std::string& key);

}  // namespace dcpp::detail
