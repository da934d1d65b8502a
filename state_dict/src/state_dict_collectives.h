#pragma once
// Private: the collectives of the state-dict helpers (full_state_dict gathers,
// broadcast_from_rank0), straight over a c10d::ProcessGroup.
//
// Every function here is collective when the group has more than one rank: every rank of the
// group calls it, in the same order relative to its other collectives. Blocking; throws
// CheckpointError naming this rank when a collective fails (a dead rank, a timeout: the group's
// timeout bounds the wait) or when the ranks' inputs disagree.

#include <dcpp/state_dict/model_layout.h>
#include <dcpp/state_dict/state_dict.h>
#include <dcpp/state_dict/state_dict_options.h>

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include <exception>
#include <string>
#include <unordered_set>
#include <vector>

namespace dcpp::detail {

/// This process's rank in `group` (0 without a group) and the group's size (1 without).
int group_rank(const c10::intrusive_ptr<c10d::ProcessGroup>& group);
int group_size(const c10::intrusive_ptr<c10d::ProcessGroup>& group);

/// Replaces every ShardedTensor leaf of `state_dict` (each holding exactly one local shard) by the
/// whole tensor, assembled from every rank's shard, on the shard's device. Every rank must hold
/// the same sharded leaves in the same order (checked); shards may have any sizes (uneven, empty)
/// and the same box may be held by several ranks. Throws CheckpointError when the shards of all
/// ranks do not cover a tensor. Without a group (or with one rank) the local shard must be whole.
void gather_sharded_leaves(StateDict& state_dict,
                           const c10::intrusive_ptr<c10d::ProcessGroup>& group);

/// Rank `root`'s `state_dict` (whole tensors and plain values; no ShardedTensor or Stateful), on
/// every rank, tensors on the CPU. Other ranks' `state_dict` is ignored. Without a group (or with
/// one rank) returns `state_dict` as it is. With `failure` on the root, every rank throws it (the
/// root sends its message instead of a state dict).
StateDict broadcast_state_dict(const StateDict& state_dict,
                               const c10::intrusive_ptr<c10d::ProcessGroup>& group,
                               const std::exception_ptr& failure = nullptr, int root = 0);

/// Every rank's `state_dict` (as broadcast_state_dict takes it), in rank order, on every rank of
/// `group`: one broadcast from each rank. Without a group: {state_dict}.
std::vector<StateDict> all_gather_state_dicts(const StateDict& state_dict,
                                              const c10::intrusive_ptr<c10d::ProcessGroup>& group);

/// The FQNs of `placements` on every stage of `layout`, joined, when the layout has a stage group
/// and `options` give or take a full state dict (full_state_dict or broadcast_from_rank0): the
/// keys that are not unexpected in one. Collective over the stage group then (one broadcast from
/// each stage); empty otherwise.
std::unordered_set<std::string> fqns_of_all_stages(
    const ModelLayout& layout, const std::vector<ParameterPlacement>& placements,
    const StateDictOptions& options);

/// Whether this process is rank 0 of `layout`'s shard, replicate and stage groups: the one that
/// holds a full state dict with cpu_offload, and that broadcast_from_rank0 sends from (global rank
/// 0 on a DeviceMesh).
bool is_first_of_layout(const ModelLayout& layout);

/// broadcast_state_dict from the first of `layout` (is_first_of_layout) to every process of its
/// stage, shard and replicate groups: along the stage group of those that are rank 0 of the other
/// two, then along the shard group of those that are rank 0 of the replicate group, then along
/// every replicate group. Collective over the three groups; a failure of the first reaches every
/// process.
StateDict broadcast_from_first_of_layout(const StateDict& state_dict, const ModelLayout& layout);

}  // namespace dcpp::detail
