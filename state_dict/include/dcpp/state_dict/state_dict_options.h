#pragma once
// The options of the state-dict helpers: DCP's `torch.distributed.checkpoint.state_dict
// .StateDictOptions`, field for field.

#include <dcpp/core/export.h>

namespace dcpp {

/// How get_*_state_dict build a state dict and set_*_state_dict apply one. A plain aggregate with
/// fluent setters: `StateDictOptions().with_full_state_dict(true).with_cpu_offload(true)`.
struct DCPP_API StateDictOptions {
  /// get: sharded tensors (and the optimizer state of sharded parameters) are gathered over the
  /// layout's shard group (ModelLayout::shard_group) into whole tensors on every rank, and a
  /// pipeline's stages joined over its stage group (collective: every rank of those groups must
  /// call). set: the given state dict holds whole tensors (of a pipeline: every stage's, other
  /// stages' keys not unexpected); each rank takes its piece.
  bool full_state_dict = false;
  /// get: tensors are copied to the CPU. With full_state_dict, only the layout's first process
  /// (rank 0 of its shard, replicate and stage groups: global rank 0 on a DeviceMesh) keeps the
  /// state dict and the others get an empty one (as DCP does, to bound memory).
  bool cpu_offload = false;
  /// get: parameters with requires_grad false are left out. set: their absence is not a missing
  /// key.
  bool ignore_frozen_params = false;
  /// set: keys missing from the given state dict, or in it but not in the model (optimizer), are
  /// an error (CheckpointError listing them) and nothing is changed. Off: they are reported
  /// (model) or ignored, and the rest is applied.
  bool strict = true;
  /// set: only the layout's first process (as for cpu_offload) holds the state dict (a whole
  /// one); the others pass anything (an empty one) and receive it by broadcast over the layout's
  /// stage, shard and replicate groups (collective over the three).
  bool broadcast_from_rank0 = false;
  /// get/set of the optimizer: one flat level, "state.<fqn>.<name>" and
  /// "param_groups.<fqn>.<option>", instead of {"state": {...}, "param_groups": [...]}.
  bool flatten_optimizer_state_dict = false;

  StateDictOptions& with_full_state_dict(bool value = true) {
    full_state_dict = value;
    return *this;
  }
  StateDictOptions& with_cpu_offload(bool value = true) {
    cpu_offload = value;
    return *this;
  }
  StateDictOptions& with_ignore_frozen_params(bool value = true) {
    ignore_frozen_params = value;
    return *this;
  }
  StateDictOptions& with_strict(bool value = true) {
    strict = value;
    return *this;
  }
  StateDictOptions& with_broadcast_from_rank0(bool value = true) {
    broadcast_from_rank0 = value;
    return *this;
  }
  StateDictOptions& with_flatten_optimizer_state_dict(bool value = true) {
    flatten_optimizer_state_dict = value;
    return *this;
  }
};

}  // namespace dcpp
