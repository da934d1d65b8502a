#pragma once
// The optimizer's state dict keyed by the FQNs of the unparallelized model: DCP's
// `get_optimizer_state_dict` / `set_optimizer_state_dict`. libtorch keys optimizer state by
// TensorImpl address; these key it by parameter name, in DCP's layout, so it survives a change of
// process or parallel layout and is read by Python's `set_optimizer_state_dict`.

#include <dcpp/core/export.h>
#include <dcpp/state_dict/model_layout.h>
#include <dcpp/state_dict/state_dict.h>
#include <dcpp/state_dict/state_dict_options.h>

#include <torch/optim/optimizer.h>

namespace dcpp {

/// The state of `optimizer`, whose parameters must all be `local` tensors of `layout`'s
/// placements (CheckpointError naming the parameter otherwise):
///
///     {"state": {fqn: {"step": ..., "exp_avg": ..., ...}, ...},
///      "param_groups": [{"lr": ..., "betas": (...), ..., "params": [fqn, ...]}, ...]}
///
/// or, with flatten_optimizer_state_dict, {"state.<fqn>.<name>": ...,
/// "param_groups.<fqn>.<option>": ...}. Names and types are those of Python's optimizer of the
/// same kind (see OptimizerStateCodec). State tensors of a sharded parameter that have its shape
/// are ShardedTensors with the parameter's global shape and offsets (gathered into whole tensors
/// with full_state_dict: collective). Tensors share storage with the optimizer's state unless
/// options copy them; numbers libtorch keeps as integers (Adam's step) are new tensors.
///
/// Lazily created state is created first as DCP does: when the optimizer has no state and no
/// parameter has a gradient, one step is taken with zero gradients and a learning rate of 0 (then
/// the gradients are reset to undefined). This mutates the optimizer, hence the non-const
/// reference. Throws CheckpointError when no codec handles the optimizer's type.
DCPP_API StateDict get_optimizer_state_dict(const ModelLayout& layout,
                                            torch::optim::Optimizer& optimizer,
                                            const StateDictOptions& options = {});

/// Replaces the optimizer's state and param-group options by `state_dict` (either layout; from
/// dcpp or from Python's `get_optimizer_state_dict`). State tensors may be ShardedTensors holding
/// this process's shard or whole tensors from which its piece is taken; they are copied. A param
/// group takes the options of the saved group that lists its first parameter (or, failing that,
/// the saved group at the same position). With strict (default), parameters of the optimizer that
/// have state but none saved, saved state of parameters the optimizer lacks, and groups with no
/// saved options throw a CheckpointError listing them before anything changes; without strict,
/// such parameters are left without state (as Python's load_state_dict does) and the rest is
/// applied. broadcast_from_rank0: rank 0's state dict is broadcast (collective). Blocking.
DCPP_API void set_optimizer_state_dict(const ModelLayout& layout,
                                       torch::optim::Optimizer& optimizer,
                                       const StateDict& state_dict,
                                       const StateDictOptions& options = {});

/// DCP's `_init_optim_state`: the lazy initialization described above, exposed for callers that
/// want in-place loading targets before the first step. Does nothing when the optimizer has state
/// or any parameter has a gradient.
DCPP_API void init_optimizer_state(torch::optim::Optimizer& optimizer);

}  // namespace dcpp
