#include <dcpp/state_dict/optimizer_layout.h>

#include "optimizer_fqn_list.h"

#include <dcpp/core/checkpoint_error.h>

namespace dcpp {

namespace {

constexpr const char* kStateEntry = "state";
constexpr const char* kParamGroupsEntry = "param_groups";
constexpr const char* kParamsEntry = "params";

bool has_prefix(const std::string& text, const std::string& prefix) {
  return text.compare(0, prefix.size(), prefix) == 0;
}

bool is_nested(const StateDict& state_dict) {
  const StateValue* state = state_dict.find(kStateEntry);
  const StateValue* groups = state_dict.find(kParamGroupsEntry);
  if (state_dict.size() != 2 || state == nullptr || groups == nullptr || !state->is_dict() ||
      !groups->is_list()) {
    return false;
  }
  for (const auto& item : state->dict()) {
    if (!item.value.is_dict()) return false;
  }
  for (const StateValue& group : groups->list()) {
    if (!group.is_dict() || group.dict().find(kParamsEntry) == nullptr) return false;
  }
  return true;
}

bool is_flat(const StateDict& state_dict) {
  const std::string state_prefix = std::string(kStateEntry) + ".";
  const std::string group_prefix = std::string(kParamGroupsEntry) + ".";
  bool has_group_option = false;
  for (const auto& item : state_dict) {
    if (has_prefix(item.key, group_prefix)) {
      has_group_option = true;
    } else if (!has_prefix(item.key, state_prefix)) {
      return false;
    }
  }
  return has_group_option;
}

}  // namespace

namespace detail {

std::vector<std::string> optimizer_fqn_list(const StateValue& value, const std::string& key) {
  std::vector<std::string> out;
  auto add = [&](const c10::IValue& element) {
    if (!element.isString()) {
      throw CheckpointError(ErrorKind::kIncompatible,
                            "optimizer state dict: '" + key + "' must be a list of FQN strings");
    }
    out.push_back(element.toStringRef());
  };
  if (value.is_list()) {
    for (const StateValue& element : value.list()) {
      if (!element.is_value()) {
        throw CheckpointError(ErrorKind::kIncompatible,
                              "optimizer state dict: '" + key + "' must be a list of FQN strings");
      }
      add(element.value());
    }
  } else if (value.is_value() && value.value().isList()) {
    for (const c10::IValue& element : value.value().toListRef()) {
      add(element);
    }
  } else {
    throw CheckpointError(ErrorKind::kIncompatible, "optimizer state dict: '" + key + "' is a " +
                                                        value.kind_name() +
                                                        ", not a list of FQN strings");
  }
  return out;
}

}  // namespace detail

OptimizerLayout optimizer_layout_of(const StateDict& state_dict) {
  if (is_nested(state_dict)) return OptimizerLayout::kNested;
  if (is_flat(state_dict)) return OptimizerLayout::kFlat;
  return OptimizerLayout::kNone;
}

const char* to_string(OptimizerLayout layout) {
  switch (layout) {
    case OptimizerLayout::kNested:
      return "nested";
    case OptimizerLayout::kFlat:
      return "flat";
    case OptimizerLayout::kNone:
      break;
  }
  return "not an optimizer state dict";
}

StateDict flatten_optimizer_state_dict(const StateDict& nested) {
  if (!is_nested(nested)) {
    throw CheckpointError(ErrorKind::kIncompatible,
                          "flatten_optimizer_state_dict: the state dict is " +
                              std::string(to_string(optimizer_layout_of(nested))) +
                              ", not a nested optimizer state dict ({\"state\": {fqn: {...}}, "
                              "\"param_groups\": [{..., \"params\": [fqn, ...]}]})");
  }
  StateDict flat;
  for (const auto& item : nested.at(kStateEntry).dict()) {
    for (const auto& entry : item.value.dict()) {
      flat.insert(std::string(kStateEntry) + "." + item.key + "." + entry.key, entry.value);
    }
  }
  std::size_t index = 0;
  for (const StateValue& group : nested.at(kParamGroupsEntry).list()) {
    const std::string where =
        std::string(kParamGroupsEntry) + "." + std::to_string(index++) + "." + kParamsEntry;
    for (const std::string& fqn :
         detail::optimizer_fqn_list(group.dict().at(kParamsEntry), where)) {
      for (const auto& option : group.dict()) {
        if (option.key != kParamsEntry) {
          flat.insert(std::string(kParamGroupsEntry) + "." + fqn + "." + option.key, option.value);
        }
      }
    }
  }
  return flat;
}

}  // namespace dcpp
