#include "optimizer_layout_match.h"

#include <dcpp/state_dict/optimizer_layout.h>

#include <ATen/ATen.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <string>
#include <unordered_map>

namespace dcpp::detail {

namespace {

constexpr const char* kGroupsStep = "param_groups.";
constexpr const char* kStateStep = "state.";

bool is_index(const std::string& text) {
  return !text.empty() && std::all_of(text.begin(), text.end(),
                                      [](unsigned char c) { return std::isdigit(c) != 0; });
}

// What a checkpoint holds under one key prefix's "param_groups.": nested groups (by index, their
// options' storage), or per-parameter (flat) options.
struct SavedGroups {
  std::map<int64_t, std::vector<std::pair<std::string, const StorageMetadata*>>> nested;
  bool any = false;
  bool has_params = false;  // some "<n>.params": the nested layout
};

// By prefix ("" or "optim."): the param-group keys of every optimizer state dict in `metadata`.
std::unordered_map<std::string, SavedGroups> saved_groups(const Metadata& metadata) {
  std::unordered_map<std::string, SavedGroups> by_prefix;
  const std::string step = kGroupsStep;
  for (const auto& [key, storage] : metadata.state_dict_metadata) {
    for (std::size_t at = key.find(step); at != std::string::npos; at = key.find(step, at + 1)) {
      if (at != 0 && key[at - 1] != '.') continue;
      SavedGroups& groups = by_prefix[key.substr(0, at)];
      groups.any = true;
      const std::string rest = key.substr(at + step.size());
      const std::size_t dot = rest.find('.');
      const std::string option = dot == std::string::npos ? "" : rest.substr(dot + 1);
      if (dot == std::string::npos || !is_index(rest.substr(0, dot)) ||
          option.find('.') != std::string::npos) {
        break;
      }
      const int64_t index = std::stoll(rest.substr(0, dot));
      groups.nested[index].emplace_back(option, &storage);
      groups.has_params = groups.has_params || option == "params";
      break;
    }
  }
  return by_prefix;
}

OptimizerLayout saved_layout(const SavedGroups& groups) {
  if (!groups.any) return OptimizerLayout::kNone;
  return groups.has_params ? OptimizerLayout::kNested : OptimizerLayout::kFlat;
}

StateValue placeholder(const StorageMetadata& storage) {
  if (const auto* tensor = std::get_if<TensorStorageMetadata>(&storage)) {
    return at::empty(tensor->size, at::TensorOptions().dtype(tensor->properties.dtype));
  }
  return StateValue();
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
    for (const auto& [option, storage] : options) group.insert(option, placeholder(*storage));
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
    if (found == saved.end()) return;
    const OptimizerLayout held = saved_layout(found->second);
    if (wanted == OptimizerLayout::kNested && held == OptimizerLayout::kFlat) {
      dict = flatten_optimizer_state_dict(dict);
    } else if (wanted == OptimizerLayout::kFlat && held == OptimizerLayout::kNested) {
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
