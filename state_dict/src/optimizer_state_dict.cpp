// get/set_optimizer_state_dict: libtorch's TensorImpl-keyed optimizer state <-> DCP's FQN-keyed
// layout, through the optimizer's OptimizerStateCodec.

#include <dcpp/state_dict/optimizer_state_dict.h>

#include "optimizer_fqn_list.h"
#include "state_dict_collectives.h"
#include "tensor_piece.h"

#include "core/shape_string.h"

#include <dcpp/core/checkpoint_error.h>
#include <dcpp/core/torch_compat.h>
#include <dcpp/state_dict/optimizer_layout.h>
#include <dcpp/state_dict/optimizer_state_codec.h>

#include <ATen/ATen.h>

#include <algorithm>
#include <map>
#include <unordered_map>
#include <unordered_set>

namespace dcpp {

using detail::shape_string;

namespace {

constexpr const char* kState = "state";
constexpr const char* kParamGroups = "param_groups";
constexpr const char* kParams = "params";

// Which placement each optimizer parameter is.
class ParameterIndex {
 public:
  explicit ParameterIndex(const std::vector<ParameterPlacement>& placements) {
    for (const ParameterPlacement& placement : placements) {
      if (!placement.is_buffer) {
        by_impl_.emplace(placement.local.unsafeGetTensorImpl(), &placement);
      }
    }
  }

  const ParameterPlacement& of(const at::Tensor& param, std::size_t group,
                               std::size_t index) const {
    auto found = by_impl_.find(param.unsafeGetTensorImpl());
    if (found == by_impl_.end()) {
      throw CheckpointError(
          ErrorKind::kUsage,
          "parameter " + std::to_string(index) + " of the optimizer's param group " +
              std::to_string(group) + " (shape " + shape_string(param.sizes()) +
              ") is not a parameter of the model layout: build the optimizer over "
              "the layout's local tensors (the model's parameters)");
    }
    return *found->second;
  }

 private:
  std::unordered_map<const c10::TensorImpl*, const ParameterPlacement*> by_impl_;
};

void init_with(torch::optim::Optimizer& optimizer, const OptimizerStateCodec& codec) {
  if (!optimizer.state().empty()) {
    return;
  }
  auto& groups = optimizer.param_groups();
  for (const auto& group : groups) {
    for (const at::Tensor& param : group.params()) {
      if (param.grad().defined()) {
        return;
      }
    }
  }
  std::vector<std::optional<double>> lrs;
  for (auto& group : groups) {
    for (const at::Tensor& param : group.params()) {
      if (param.requires_grad()) {
        param.mutable_grad() = at::zeros_like(param);
      }
    }
    std::optional<double> lr;
    if (group.has_options()) {
      try {
        lr = group.options().get_lr();
        group.options().set_lr(0.0);
      } catch (const c10::Error&) {
        lr.reset();  // options without a learning rate
      }
    }
    lrs.push_back(lr);
  }
  auto restore = [&] {
    for (std::size_t g = 0; g < groups.size(); ++g) {
      if (lrs[g]) {
        groups[g].options().set_lr(*lrs[g]);
      }
      for (const at::Tensor& param : groups[g].params()) {
        param.mutable_grad() = at::Tensor();
      }
    }
  };
  try {
    codec.initialization_step(optimizer);
  } catch (...) {
    restore();
    throw;
  }
  restore();
}

// A state tensor of a sharded parameter that has the parameter's local shape becomes a
// ShardedTensor with the parameter's global shape and offsets.
StateValue wrap_state_value(const StateValue& value, const ParameterPlacement& placement,
                            bool follows) {
  if (value.is_tensor()) {
    const at::Tensor tensor = value.tensor().detach();
    if (placement.is_sharded() && follows && tensor.dim() > 0 &&
        tensor.sizes() == placement.local.sizes()) {
      std::vector<Shard> shards;  // an empty piece is no shard (see get_model_state_dict)
      if (tensor.numel() > 0) {
        shards.push_back(Shard{tensor, placement.offsets});
      }
      return ShardedTensor(placement.global_shape, std::move(shards), tensor.scalar_type());
    }
    return tensor;
  }
  if (value.is_list()) {
    StateList out;
    for (const StateValue& element : value.list()) {
      out.push_back(wrap_state_value(element, placement, follows));
    }
    return out;
  }
  return value;
}

// A saved optimizer state dict, either layout, by FQN.
struct SavedOptimizer {
  std::map<std::string, StateDict> state;            // fqn -> {name: value}
  std::vector<StateDict> groups;                     // nested: saved param groups
  std::vector<std::vector<std::string>> group_fqns;  // nested: their "params"
  std::map<std::string, StateDict> group_of_fqn;     // flattened: fqn -> {option: value}
  bool flattened = false;
  std::vector<std::string> unexpected;
};

// "<fqn>.<name>" -> (fqn, name): names never hold dots.
std::pair<std::string, std::string> split_last(const std::string& rest, const std::string& key) {
  const auto dot = rest.rfind('.');
  if (dot == std::string::npos || dot == 0 || dot + 1 == rest.size()) {
    throw CheckpointError(ErrorKind::kIncompatible, "flattened optimizer state dict key '" + key +
                                                        "' is not '<prefix>.<fqn>.<name>'");
  }
  return {rest.substr(0, dot), rest.substr(dot + 1)};
}

SavedOptimizer parse_saved(const StateDict& state_dict) {
  SavedOptimizer saved;
  const StateValue* state = state_dict.find(kState);
  const StateValue* groups = state_dict.find(kParamGroups);
  if ((state != nullptr && state->is_dict()) || (groups != nullptr && groups->is_list())) {
    if (state != nullptr) {
      if (!state->is_dict()) {
        throw CheckpointError(ErrorKind::kIncompatible, "optimizer state dict: 'state' is a " +
                                                            std::string(state->kind_name()) +
                                                            ", not a dict keyed by FQN");
      }
      for (const auto& item : state->dict()) {
        if (!item.value.is_dict()) {
          throw CheckpointError(ErrorKind::kIncompatible,
                                "optimizer state dict: 'state." + item.key + "' is a " +
                                    item.value.kind_name() + ", not a dict");
        }
        saved.state.emplace(item.key, item.value.dict());
      }
    }
    if (groups != nullptr) {
      if (!groups->is_list()) {
        throw CheckpointError(ErrorKind::kIncompatible,
                              "optimizer state dict: 'param_groups' is a " +
                                  std::string(groups->kind_name()) + ", not a list");
      }
      std::size_t i = 0;
      for (const StateValue& group : groups->list()) {
        const std::string where = "param_groups." + std::to_string(i++);
        if (!group.is_dict()) {
          throw CheckpointError(
              ErrorKind::kIncompatible,
              "optimizer state dict: '" + where + "' is a " + group.kind_name() + ", not a dict");
        }
        const StateValue* params = group.dict().find(kParams);
        saved.group_fqns.push_back(params == nullptr
                                       ? std::vector<std::string>{}
                                       : detail::optimizer_fqn_list(*params, where + ".params"));
        saved.groups.push_back(group.dict());
      }
    }
    for (const auto& item : state_dict) {
      if (item.key != kState && item.key != kParamGroups) {
        saved.unexpected.push_back(item.key);
      }
    }
    return saved;
  }
  saved.flattened = true;
  const std::string state_prefix = std::string(kState) + ".";
  const std::string group_prefix = std::string(kParamGroups) + ".";
  for (const auto& item : state_dict) {
    if (item.key.rfind(state_prefix, 0) == 0) {
      auto [fqn, name] = split_last(item.key.substr(state_prefix.size()), item.key);
      saved.state[fqn].insert(name, item.value);
    } else if (item.key.rfind(group_prefix, 0) == 0) {
      auto [fqn, option] = split_last(item.key.substr(group_prefix.size()), item.key);
      saved.group_of_fqn[fqn].insert(option, item.value);
    } else {
      saved.unexpected.push_back(item.key);
    }
  }
  return saved;
}

// This process's own copy of a saved state value, on the parameter's device: tensors that follow
// a sharded parameter are cut to its piece; floating tensors that follow it take its dtype.
StateValue localize(const StateValue& value, const ParameterPlacement& placement, bool follows,
                    const std::string& key) {
  const at::Tensor& param = placement.local;
  auto own = [&](const at::Tensor& tensor, bool param_shaped) {
    at::ScalarType dtype = tensor.scalar_type();
    if (param_shaped && at::isFloatingType(dtype) && at::isFloatingType(param.scalar_type())) {
      dtype = param.scalar_type();
    }
    return tensor.detach().to(param.device(), dtype, /*non_blocking=*/false, /*copy=*/true);
  };
  switch (value.kind()) {
    case StateValue::Kind::kTensor: {
      const at::Tensor& tensor = value.tensor();
      const bool param_shaped =
          follows && tensor.dim() > 0 &&
          (tensor.sizes() == param.sizes() ||
           (placement.is_sharded() && tensor.sizes() == at::IntArrayRef(placement.global_shape)));
      if (param_shaped) {
        return own(
            detail::piece_of(value, param.sizes(), placement.global_shape, placement.offsets, key),
            true);
      }
      return own(tensor, false);
    }
    case StateValue::Kind::kShardedTensor: {
      const ShardedTensor& sharded = value.sharded_tensor();
      if (follows && placement.is_sharded()) {
        return own(
            detail::piece_of(value, param.sizes(), placement.global_shape, placement.offsets, key),
            true);
      }
      // A whole tensor saved sharded: this process needs all of it.
      return own(detail::piece_of(value, sharded.global_shape(), {}, {}, key),
                 follows && at::IntArrayRef(sharded.global_shape()) == param.sizes());
    }
    case StateValue::Kind::kList: {
      StateList out;
      std::size_t i = 0;
      for (const StateValue& element : value.list()) {
        out.push_back(localize(element, placement, follows, key + "." + std::to_string(i++)));
      }
      return out;
    }
    case StateValue::Kind::kDict: {
      StateDict out;
      for (const auto& item : value.dict()) {
        out.insert(item.key, localize(item.value, placement, follows, key + "." + item.key));
      }
      return out;
    }
    default:
      return value;
  }
}

// Restored options that keep per-parameter state the present ones do not
// (OptimizerStateCodec::state_kept_with) must come with that state for at least one parameter of
// the group: else they would be restored without it. Throws CheckpointError naming the entries.
void require_state_of_restored_options(const OptimizerStateCodec& codec,
                                       const torch::optim::OptimizerOptions& present,
                                       const torch::optim::OptimizerOptions& restored,
                                       const std::vector<const ParameterPlacement*>& members,
                                       const SavedOptimizer& saved, int rank) {
  std::vector<std::string> kept_now;
  for (const KeptState& kept : codec.state_kept_with(present)) kept_now.push_back(kept.entry);
  std::vector<std::string> lacking, because;
  for (const KeptState& kept : codec.state_kept_with(restored)) {
    if (std::find(kept_now.begin(), kept_now.end(), kept.entry) != kept_now.end()) continue;
    bool given = false;
    for (const ParameterPlacement* member : members) {
      const auto found = saved.state.find(member->fqn);
      const StateValue* value =
          found == saved.state.end() ? nullptr : found->second.find(kept.entry);
      given = given || (value != nullptr && (value->is_tensor() || value->is_sharded_tensor()));
    }
    if (!given) {
      lacking.push_back(kept.entry);
      because.push_back(kept.because);
    }
  }
  if (lacking.empty()) return;
  std::string options;
  for (const std::string& option : because) options += (options.empty() ? "" : ", ") + option;
  throw CheckpointError(
      ErrorKind::kIncompatible,
      "set_optimizer_state_dict on rank " + std::to_string(rank) + ", the param group of '" +
          members.front()->fqn + "': the saved " + codec.name() + " options (" + options +
          ") keep per-parameter state (" + detail::quoted_list(lacking) +
          ") that this optimizer's options do not, and none was given: a load target made from "
          "this "
          "optimizer has no place for it. Nothing was loaded; make the optimizer with the saved "
          "options before loading, so that their state is loaded with them");
}

[[noreturn]] void throw_incompatible(const std::vector<std::string>& missing,
                                     const std::vector<std::string>& unexpected, int rank) {
  std::string message =
      "set_optimizer_state_dict (strict) on rank " + std::to_string(rank) + ": nothing was loaded.";
  if (!missing.empty()) {
    message +=
        " Missing (in the optimizer, not in the state dict): " + detail::quoted_list(missing) + ".";
  }
  if (!unexpected.empty()) {
    message += " Unexpected (in the state dict, not in the optimizer): " +
               detail::quoted_list(unexpected) + ".";
  }
  throw CheckpointError(ErrorKind::kIncompatible,
                        message + " Pass StateDictOptions::strict = false to load the rest.");
}

using OptimizerStates = std::decay_t<decltype(std::declval<torch::optim::Optimizer&>().state())>;

// What set_optimizer_state_dict changes, decoded (which may throw) before anything is changed.
struct OptimizerRestore {
  /// Per param group: its restored options; null keeps the present ones.
  std::vector<std::unique_ptr<torch::optim::OptimizerOptions>> group_options;
  /// Per parameter with state to set or drop: its restored state; null erases the present one.
  std::vector<
      std::pair<OptimizerStates::key_type, std::unique_ptr<torch::optim::OptimizerParamState>>>
      states;
  std::vector<std::string> missing;
  std::vector<std::string> unexpected;
};

// What set_optimizer_state_dict on `rank` failed at: `subject` (the state or the group of a
// parameter), then `error`'s own message, of its kind.
[[noreturn]] void rethrow_about(const CheckpointError& error, int rank,
                                const std::string& subject) {
  throw CheckpointError(error.kind(), "set_optimizer_state_dict on rank " + std::to_string(rank) +
                                          ", " + subject + ": " + error.what_without_backtrace());
}

// The saved options of param group `g` of `group_count`, whose first parameter is `first_fqn`:
// found by that parameter's name, else (nested form) by position when the checkpoint has as many
// groups; null when the checkpoint has none for it.
const StateDict* saved_group_options(const SavedOptimizer& saved, const std::string& first_fqn,
                                     std::size_t g, std::size_t group_count) {
  if (saved.flattened) {
    auto found = saved.group_of_fqn.find(first_fqn);
    return found == saved.group_of_fqn.end() ? nullptr : &found->second;
  }
  for (std::size_t s = 0; s < saved.groups.size(); ++s) {
    for (const std::string& fqn : saved.group_fqns[s]) {
      if (fqn == first_fqn) return &saved.groups[s];
    }
  }
  return saved.groups.size() == group_count ? &saved.groups[g] : nullptr;
}

// The restored state of `param`, at `placement`, from its saved entries (each localized to this
// rank's piece of the parameter).
std::unique_ptr<torch::optim::OptimizerParamState> restored_state(
    const OptimizerStateCodec& codec, const StateDict& saved_entries, const at::Tensor& param,
    const ParameterPlacement& placement) {
  StateDict local;
  for (const auto& item : saved_entries) {
    local.insert(item.key, localize(item.value, placement, codec.follows_parameter(item.key),
                                    "state." + placement.fqn + "." + item.key));
  }
  return codec.decode_state(local, param);
}

// Plans the restore of `optimizer`'s param groups and parameters' states from `saved`, changing
// nothing. Throws CheckpointError naming the parameter whose state or group cannot be decoded.
OptimizerRestore plan_restore(torch::optim::Optimizer& optimizer, const OptimizerStateCodec& codec,
                              const ParameterIndex& index, const SavedOptimizer& saved, int rank) {
  auto& param_groups = optimizer.param_groups();
  auto& states = optimizer.state();
  OptimizerRestore restore;
  restore.group_options.resize(param_groups.size());
  restore.unexpected = saved.unexpected;
  std::unordered_set<std::string> optimizer_fqns;
  for (std::size_t g = 0; g < param_groups.size(); ++g) {
    auto& param_group = param_groups[g];
    std::vector<const ParameterPlacement*> members;
    for (std::size_t p = 0; p < param_group.params().size(); ++p) {
      members.push_back(&index.of(param_group.params()[p], g, p));
      optimizer_fqns.insert(members.back()->fqn);
    }
    if (members.empty() || !param_group.has_options()) continue;
    const std::string& first_fqn = members.front()->fqn;
    auto& new_options = restore.group_options[g];
    if (const StateDict* saved_options =
            saved_group_options(saved, first_fqn, g, param_groups.size())) {
      new_options = param_group.options().clone();
      try {
        codec.decode_options(*saved_options, *new_options);
      } catch (const CheckpointError& error) {
        rethrow_about(error, rank, "the param group of '" + first_fqn + "'");
      }
    } else {
      restore.missing.push_back("param_groups (the group of '" + first_fqn + "')");
    }
    for (std::size_t p = 0; p < members.size(); ++p) {
      const at::Tensor& param = param_group.params()[p];
      const ParameterPlacement& placement = *members[p];
      const auto key = compat::optimizer_state_key(states, param);
      auto found = saved.state.find(placement.fqn);
      if (found == saved.state.end()) {
        if (states.find(key) != states.end()) {
          restore.missing.push_back("state." + placement.fqn);
          restore.states.emplace_back(key, nullptr);
        }
        continue;
      }
      try {
        restore.states.emplace_back(key, restored_state(codec, found->second, param, placement));
      } catch (const CheckpointError& error) {
        rethrow_about(error, rank, codec.name() + " state of '" + placement.fqn + "'");
      }
    }
    if (new_options) {
      require_state_of_restored_options(codec, param_group.options(), *new_options, members, saved,
                                        rank);
    }
  }
  for (const auto& item : saved.state) {
    if (optimizer_fqns.count(item.first) == 0) restore.unexpected.push_back("state." + item.first);
  }
  return restore;
}

// The union of every stage's full optimizer state dict (nested), in stage order: the states by
// FQN, the stages' param groups one after the other (a group is found by its parameters' names).
StateDict join_optimizer_stages(const StateDict& mine,
                                const c10::intrusive_ptr<c10d::ProcessGroup>& stages) {
  StateDict state;
  StateList groups;
  for (const StateDict& of_stage : detail::all_gather_state_dicts(mine, stages)) {
    const StateValue* of_state = of_stage.find(kState);
    const StateValue* of_groups = of_stage.find(kParamGroups);
    if (of_state != nullptr && of_state->is_dict()) {
      for (const auto& item : of_state->dict()) state.insert(item.key, item.value);
    }
    if (of_groups != nullptr && of_groups->is_list()) {
      for (const StateValue& group : of_groups->list()) groups.push_back(group);
    }
  }
  StateDict joined;
  joined.insert(kState, std::move(state));
  joined.insert(kParamGroups, std::move(groups));
  return joined;
}

// Changes `optimizer` as `restore` says; cannot fail.
void apply_restore(torch::optim::Optimizer& optimizer, OptimizerRestore& restore) {
  auto& param_groups = optimizer.param_groups();
  for (std::size_t g = 0; g < param_groups.size(); ++g) {
    if (restore.group_options[g]) param_groups[g].set_options(std::move(restore.group_options[g]));
  }
  auto& states = optimizer.state();
  for (auto& [key, state] : restore.states) {
    if (state) {
      states[key] = std::move(state);
    } else {
      states.erase(key);
    }
  }
}

}  // namespace

void init_optimizer_state(torch::optim::Optimizer& optimizer) {
  init_with(optimizer, *find_optimizer_state_codec(optimizer));
}

StateDict get_optimizer_state_dict(const ModelLayout& layout, torch::optim::Optimizer& optimizer,
                                   const StateDictOptions& options) {
  const auto codec = find_optimizer_state_codec(optimizer);
  init_with(optimizer, *codec);
  const std::vector<ParameterPlacement> placements = layout.placements();
  const ParameterIndex index(placements);
  auto& states = optimizer.state();
  StateDict state;
  StateList groups;
  const auto& param_groups = optimizer.param_groups();
  for (std::size_t g = 0; g < param_groups.size(); ++g) {
    const auto& group = param_groups[g];
    StateList fqns;
    for (std::size_t p = 0; p < group.params().size(); ++p) {
      const at::Tensor& param = group.params()[p];
      const ParameterPlacement& placement = index.of(param, g, p);
      fqns.push_back(placement.fqn);
      auto found = states.find(compat::optimizer_state_key(states, param));
      if (found == states.end() || !found->second) {
        continue;
      }
      StateDict encoded = codec->encode_state(*found->second);
      StateDict wrapped;
      for (const auto& item : encoded) {
        wrapped.insert(item.key,
                       wrap_state_value(item.value, placement, codec->follows_parameter(item.key)));
      }
      state.insert(placement.fqn, std::move(wrapped));
    }
    StateDict saved_group =
        group.has_options() ? codec->encode_options(group.options()) : StateDict();
    saved_group.insert(kParams, std::move(fqns));
    groups.push_back(std::move(saved_group));
  }
  StateDict out;
  out.insert(kState, std::move(state));
  out.insert(kParamGroups, std::move(groups));
  if (options.full_state_dict) {
    detail::gather_sharded_leaves(out, layout.shard_group());
    if (layout.stage_group()) out = join_optimizer_stages(out, layout.stage_group());
  }
  if (options.cpu_offload) {
    if (options.full_state_dict && !detail::is_first_of_layout(layout)) {
      return {};
    }
    detail::offload_to_cpu(out);
  }
  return options.flatten_optimizer_state_dict ? flatten_optimizer_state_dict(out) : out;
}

void set_optimizer_state_dict(const ModelLayout& layout, torch::optim::Optimizer& optimizer,
                              const StateDict& state_dict, const StateDictOptions& options) {
  const auto group = layout.process_group();
  const int rank = detail::group_rank(group);
  StateDict received;
  const StateDict* source = &state_dict;
  if (options.broadcast_from_rank0) {
    received = detail::broadcast_from_first_of_layout(state_dict, layout);
    source = &received;
  }
  const auto codec = find_optimizer_state_codec(optimizer);
  init_with(optimizer, *codec);
  const std::vector<ParameterPlacement> placements = layout.placements();
  OptimizerRestore restore =
      plan_restore(optimizer, *codec, ParameterIndex(placements), parse_saved(*source), rank);
  // A full state dict of a pipeline holds every stage's parameters: not unexpected here.
  const std::unordered_set<std::string> of_all_stages =
      detail::fqns_of_all_stages(layout, placements, options);
  auto& unexpected = restore.unexpected;
  unexpected.erase(std::remove_if(unexpected.begin(), unexpected.end(),
                                  [&](const std::string& key) {
                                    return key.rfind("state.", 0) == 0 &&
                                           of_all_stages.count(key.substr(6)) != 0;
                                  }),
                   unexpected.end());
  if (options.strict && (!restore.missing.empty() || !restore.unexpected.empty())) {
    throw_incompatible(restore.missing, restore.unexpected, rank);
  }
  apply_restore(optimizer, restore);
}

}  // namespace dcpp
