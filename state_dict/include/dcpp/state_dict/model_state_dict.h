#pragma once
// The model's state dict keyed by the FQNs of the unparallelized model: DCP's
// `get_model_state_dict` / `set_model_state_dict`.

#include <dcpp/core/export.h>
#include <dcpp/state_dict/incompatible_keys.h>
#include <dcpp/state_dict/model_layout.h>
#include <dcpp/state_dict/state_dict.h>
#include <dcpp/state_dict/state_dict_options.h>

#include <string>
#include <vector>

namespace torch::nn {
class Module;
}  // namespace torch::nn

namespace dcpp {

/// One entry per placement of `layout` (parameters and buffers), in placement order, keyed by FQN:
/// a whole tensor as a plain tensor, a sharded one as a ShardedTensor of the global shape holding
/// this process's piece. Tensors are detached and share storage with the model (loading into the
/// result with dcpp::load writes into the model), unless options copy them (cpu_offload of a
/// device tensor, full_state_dict of a sharded one).
///
/// Options: full_state_dict gathers sharded tensors into whole ones over layout.shard_group() and
/// joins a pipeline's stages over layout.stage_group() (collective: every rank of those groups
/// calls, with the same sharded FQNs in the same order);
/// cpu_offload copies to the CPU (with full_state_dict on more than one rank: rank 0 alone gets
/// the result, the others an empty dict); ignore_frozen_params leaves out parameters that do not
/// require grad. Throws CheckpointError when a collective fails or the ranks' sharded tensors do
/// not agree.
DCPP_API StateDict get_model_state_dict(const ModelLayout& layout,
                                        const StateDictOptions& options = {});
/// The same with plain_layout(module).
DCPP_API StateDict get_model_state_dict(torch::nn::Module& module,
                                        const StateDictOptions& options = {});

/// Copies `state_dict` into the model's tensors in place (no autograd). A whole tensor's value is
/// a tensor of its shape; a sharded tensor's value is a ShardedTensor of its global shape holding
/// a shard at this process's offsets (what get_model_state_dict returns, possibly loaded by
/// dcpp::load) or a whole tensor, from which the piece is taken. Dtypes are converted as
/// `Tensor::copy_` does.
///
/// With options.strict, missing or unexpected keys throw a CheckpointError listing them and nothing
/// is copied; otherwise they are returned. Frozen parameters may be absent with
/// ignore_frozen_params. broadcast_from_rank0: rank 0's `state_dict` (whole tensors) is broadcast
/// over the process group and every rank applies it (collective). Throws CheckpointError naming
/// the key on a shape mismatch or a value that is not a tensor. Blocking; not thread-safe against
/// training on the same model.
DCPP_API IncompatibleKeys set_model_state_dict(const ModelLayout& layout,
                                               const StateDict& state_dict,
                                               const StateDictOptions& options = {});
/// The same with plain_layout(module).
DCPP_API IncompatibleKeys set_model_state_dict(torch::nn::Module& module,
                                               const StateDict& state_dict,
                                               const StateDictOptions& options = {});

}  // namespace dcpp
