#include <dcpp/state_dict/model_state_dict.h>

#include "state_dict_collectives.h"
#include "tensor_piece.h"

#include <dcpp/core/checkpoint_error.h>
#include <dcpp/state_dict/plain_layout.h>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <torch/nn/module.h>

#include <unordered_set>

namespace dcpp {

namespace {

bool is_frozen(const ParameterPlacement& placement) {
  return !placement.is_buffer && !placement.local.requires_grad();
}

// The union of every stage's full state dict, in stage order (other stages' tensors on the CPU).
StateDict join_model_stages(const StateDict& mine,
                            const c10::intrusive_ptr<c10d::ProcessGroup>& stages) {
  StateDict joined;
  int stage = 0;
  for (const StateDict& of_stage : detail::all_gather_state_dicts(mine, stages)) {
    for (const auto& item : of_stage) {
      if (joined.contains(item.key)) {
        throw CheckpointError(ErrorKind::kUsage,
                              "full_state_dict: '" + item.key + "' is held by two pipeline " +
                                  "stages (the second: stage " + std::to_string(stage) +
                                  "); the stages of a pipeline must own disjoint FQNs");
      }
      joined.insert(item.key, item.value);
    }
    ++stage;
  }
  return joined;
}

}  // namespace

StateDict get_model_state_dict(const ModelLayout& layout, const StateDictOptions& options) {
  StateDict state_dict;
  for (const ParameterPlacement& placement : layout.placements()) {
    if (options.ignore_frozen_params && is_frozen(placement)) {
      continue;
    }
    const at::Tensor local = placement.local.detach();
    if (placement.is_sharded()) {
      // An empty piece (an uneven split can leave a rank without rows) is no shard at all, so
      // the checkpoint never sees two chunks at one offset.
      std::vector<Shard> shards;
      if (local.numel() > 0) {
        shards.push_back(Shard{local, placement.offsets});
      }
      state_dict.insert(placement.fqn, ShardedTensor(placement.global_shape, std::move(shards),
                                                     local.scalar_type()));
    } else {
      state_dict.insert(placement.fqn, local);
    }
  }
  if (options.full_state_dict) {
    detail::gather_sharded_leaves(state_dict, layout.shard_group());
    if (layout.stage_group()) state_dict = join_model_stages(state_dict, layout.stage_group());
  }
  if (options.cpu_offload) {
    if (options.full_state_dict && !detail::is_first_of_layout(layout)) {
      return {};
    }
    detail::offload_to_cpu(state_dict);
  }
  return state_dict;
}

StateDict get_model_state_dict(torch::nn::Module& module, const StateDictOptions& options) {
  return get_model_state_dict(*plain_layout(module), options);
}

IncompatibleKeys set_model_state_dict(const ModelLayout& layout, const StateDict& state_dict,
                                      const StateDictOptions& options) {
  const auto group = layout.process_group();
  StateDict received;
  const StateDict* source = &state_dict;
  if (options.broadcast_from_rank0) {
    received = detail::broadcast_from_first_of_layout(state_dict, layout);
    source = &received;
  }
  const std::vector<ParameterPlacement> placements = layout.placements();
  const std::unordered_set<std::string> of_all_stages =
      detail::fqns_of_all_stages(layout, placements, options);
  IncompatibleKeys keys;
  std::unordered_set<std::string> fqns;
  std::vector<std::pair<at::Tensor, at::Tensor>> copies;  // (destination, source piece)
  for (const ParameterPlacement& placement : placements) {
    fqns.insert(placement.fqn);
    const StateValue* value = source->find(placement.fqn);
    if (value == nullptr) {
      if (!(options.ignore_frozen_params && is_frozen(placement))) {
        keys.missing_keys.push_back(placement.fqn);
      }
      continue;
    }
    copies.emplace_back(placement.local,
                        detail::piece_of(*value, placement.local.sizes(), placement.global_shape,
                                         placement.offsets, placement.fqn));
  }
  for (const auto& item : *source) {
    if (fqns.count(item.key) == 0 && of_all_stages.count(item.key) == 0) {
      keys.unexpected_keys.push_back(item.key);
    }
  }
  if (options.strict && (!keys.missing_keys.empty() || !keys.unexpected_keys.empty())) {
    std::string message = "set_model_state_dict (strict) on rank " +
                          std::to_string(detail::group_rank(group)) + ": nothing was loaded.";
    if (!keys.missing_keys.empty()) {
      message += " Missing keys (in the model, not in the state dict): " +
                 detail::quoted_list(keys.missing_keys) + ".";
    }
    if (!keys.unexpected_keys.empty()) {
      message += " Unexpected keys (in the state dict, not in the model): " +
                 detail::quoted_list(keys.unexpected_keys) + ".";
    }
    throw CheckpointError(ErrorKind::kIncompatible,
                          message + " Pass StateDictOptions::strict = false to load the rest.");
  }
  c10::AutoGradMode no_grad(false);
  for (auto& [destination, piece] : copies) {
    destination.copy_(piece);
  }
  return keys;
}

IncompatibleKeys set_model_state_dict(torch::nn::Module& module, const StateDict& state_dict,
                                      const StateDictOptions& options) {
  return set_model_state_dict(*plain_layout(module), state_dict, options);
}

}  // namespace dcpp
