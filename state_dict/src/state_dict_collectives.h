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

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include <exception>

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

/// Rank 0's `state_dict` (whole tensors and plain values; no ShardedTensor or Stateful), on every
/// rank, tensors on the CPU. Other ranks' `state_dict` is ignored. Without a group (or with one
/// rank) returns `state_dict` as it is.
/// With `failure` on rank 0, every rank throws it (rank 0 sends its message instead of a state
/// dict).
StateDict broadcast_state_dict(const StateDict& state_dict,
                               const c10::intrusive_ptr<c10d::ProcessGroup>& group,
                               const std::exception_ptr& failure = nullptr);

/// Whether this process is rank 0 of `layout`'s shard group and of its replicate group: the one
/// that holds a full state dict with cpu_offload, and that broadcast_from_rank0 sends from.
bool is_first_of_layout(const ModelLayout& layout);

/// broadcast_state_dict from the first of `layout` (is_first_of_layout) to every process of its
/// shard and replicate groups: along the shard group of replica 0, then along every replicate
/// group. Collective over both groups; a failure of the first reaches every process.
StateDict broadcast_from_first_of_layout(const StateDict& state_dict, const ModelLayout& layout);

}  // namespace dcpp::detail
