#pragma once
// Private: the collectives of the state-dict helpers (full_state_dict gathers,
// broadcast_from_rank0), straight over a c10d::ProcessGroup.
//
// Every function here is collective when the group has more than one rank: every rank of the
// group calls it, in the same order relative to its other collectives. Blocking; throws
// CheckpointError naming this rank when a collective fails (a dead rank, a timeout: the group's
// timeout bounds the wait) or when the ranks' inputs disagree.

#include <dcpp/state_dict/state_dict.h>

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

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
StateDict broadcast_state_dict(const StateDict& state_dict,
                               const c10::intrusive_ptr<c10d::ProcessGroup>& group);

}  // namespace dcpp::detail
