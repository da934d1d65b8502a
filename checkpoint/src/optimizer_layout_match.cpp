#include "optimizer_layout_match.h"

#include <dcpp/state_dict/optimizer_layout.h>

#include <ATen/ATen.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>

namespace dcpp::detail {

namespace {

constexpr const char* kGroupsStep = "param_groups.";
constexpr const char* kStateStep = "state.";

// A param-group number: up to 9 digits (a hostile key cannot overflow it).
std::optional<int64_t> group_number(const std::string& text) {
  if (text.empty() || text.size() > 9 ||
      !std::all_of(text.begin(), text.end(),
                   [](unsigned char c) { return std::isdigit(c) != 0; })) {
    return std::nullopt;
  }
  return std::stoll(text);
}

// Where "param_groups." starts a step of `key` (at its start or after a dot), or npos.
std::size_t groups_step_at(const std::string& key) {
  const std::string step = kGroupsStep;
  std::size_t at = key.find(step);
  while (at != std::string::npos && at != 0 && key[at - 1] != '.') at = key.find(step, at + 1);
  return at;
}

// What a checkpoint holds under one key prefix's "param_groups.": nested groups (by number, their
// options' storage), or per-parameter (flat) options.
struct SavedGroups {
  std::map<int64_t, std::vector<std::pair<std::string, const StorageMetadata*>>> nested;
  bool has_params = false;  // some "<n>.params": the nested layout
};

// By prefix ("" or "optim."): the param-group keys of every optimizer state dict in `metadata`.
std::unordered_map<std::string, SavedGroups> saved_groups(const Metadata& metadata) {
  std::unordered_map<std::string, SavedGroups> by_prefix;
  for (const auto& [key, storage] : metadata.state_dict_metadata) {
    const std::size_t at = groups_step_at(key);
    if (at == std::string::npos) continue;
    SavedGroups& groups = by_prefix[key.substr(0, at)];
    const std::string rest = key.substr(at + std::string(kGroupsStep).size());
    const std::size_t dot = rest.find('.');
    if (dot == std::string::npos) continue;
    const std::optional<int64_t> number = group_number(rest.substr(0, dot));
    const std::string option = rest.substr(dot + 1);
    if (!number || option.find('.') != std::string::npos) continue;  // "<fqn>.<option>": flat
    groups.nested[*number].emplace_back(option, &storage);
    groups.has_params = groups.has_params || option == "params";
  }
  return by_prefix;
}

// A value of the saved kind for the load to replace: a tensor of the saved shape and dtype (a
// param-group option: a few elements; nullopt beyond kMaxOptionElements, or for a shape no tensor
// has), or None for bytes.
constexpr int64_t kMaxOptionElements = 1 << 16;
std::optional<StateValue> placeholder(const StorageMetadata& storage) {
  const auto* tensor = std::get_if<TensorStorageMetadata>(&storage);
  if (tensor == nullptr) return StateValue();
  int64_t elements = 1;
  for (const int64_t size : tensor->size) {
    if (size < 0 || size > kMaxOptionElements) return std::nullopt;
    elements *= size;
    if (elements > kMaxOptionElements) return std::nullopt;
  }
  return StateValue(at::empty(tensor->size, at::TensorOptions().dtype(tensor->properties.dtype)));
}

// A flat target as the nested one the checkpoint holds: its state values, the saved groups.
StateDict nested_target(const StateDict& flat, const SavedGroups& groups) {
  StateDict state;
  const std::string state_step = kStateStep;
  for (const auto& item : flat) {
    if (item.key.compare(0, state_step.size(), state_step) != 0) continue;
    const std::string rest = item.key.substr(state_step.size());
    const std::size_t dot = rest.rfind('.');
    if (dot == std::string::npos) return flat;  // not "<fqn>.<name>": leave it to the planner
    StateValue* entries = state.find(rest.substr(0, dot));
    if (entries == nullptr) entries = &state.insert(rest.substr(0, dot), StateDict());
    entries->dict().insert(rest.substr(dot + 1), item.value);
  }
  StateList param_groups;
  int64_t next = 0;
  for (const auto& [index, options] : groups.nested) {
    if (index != next++) return flat;  // not groups 0..n-1: leave it to the planner
    StateDict group;
    for (const auto& [option, storage] : options) {
      std::optional<StateValue> value = placeholder(*storage);
      if (!value) return flat;  // not an option a load could fill: leave it to the planner
      group.insert(option, std::move(*value));
    }
    param_groups.push_back(std::move(group));
  }
  StateDict nested;
  nested.insert("state", std::move(state));
  nested.insert("param_groups", std::move(param_groups));
  return nested;
}

void match(StateDict& dict, const std::string& prefix,
           const std::unordered_map<std::string, SavedGroups>& saved) {
  const OptimizerLayout wanted = optimizer_layout_of(dict);
  if (wanted != OptimizerLayout::kNone) {
    const auto found = saved.find(prefix);
    if (found == saved.end()) return;  // no param groups saved here: nothing to match
    const bool held_nested = found->second.has_params;
    if (wanted == OptimizerLayout::kNested && !held_nested) {
      dict = flatten_optimizer_state_dict(dict);
    } else if (wanted == OptimizerLayout::kFlat && held_nested) {
      dict = nested_target(dict, found->second);
    }
    return;
  }
  for (auto& item : dict) {
    if (item.value.is_dict()) match(item.value.dict(), prefix + item.key + ".", saved);
  }
}

}  // namespace

void match_optimizer_layouts(StateDict& targets, const Metadata& metadata) {
  const auto saved = saved_groups(metadata);
  if (saved.empty()) return;
  match(targets, "", saved);
}

}  // namespace dcpp::detail
