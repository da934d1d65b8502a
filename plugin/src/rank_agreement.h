#pragma once
// How the plugin's ranks agree, on core's GroupCalls (the one place dcpp calls c10d). The
// manager's commit status, the step every rank restores, the root's and the remote tier's
// preparation outcome and the callback's save/stop flags all go through these functions.
//
// Contract of every function here:
//   - Collective over `group`: every rank of the group calls it, with the same `root` and the same
//     number of flags, in the same order relative to the group's other collectives, and blocks
//     until every rank has (or the group's timeout passes).
//   - A null `group` means one process: the function returns its input at once and communicates
//     nothing.
//   - Not thread-safe on one group: the calls on a group come from one thread (the plugin calls
//     them from the training thread only; the async uploads have a group of their own).
//   - Throws CheckpointError naming this rank when the collective fails (the group's timeout, a
//     peer that died); the outcome is then unknown on the other ranks.

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace dcpp::detail {

using ProcessGroupPtr = c10::intrusive_ptr<c10d::ProcessGroup>;

/// True on every rank when `ok` is true on every rank; false on every rank otherwise.
bool every_rank_ok(const ProcessGroupPtr& group, bool ok);

/// The element-wise maximum of `flags` over the ranks: a flag set on any rank is set on all.
std::vector<int64_t> max_over_ranks(const ProcessGroupPtr& group, std::vector<int64_t> flags);

/// `root`'s `value` on every rank (the others' `value` is ignored).
int64_t broadcast_from(const ProcessGroupPtr& group, int64_t value, int root);

/// `root`'s `text` on every rank (the others' `text` is ignored); any bytes, any length.
std::string broadcast_text_from(const ProcessGroupPtr& group, const std::string& text, int root);

/// Every rank's `value`, by rank (one all-gather; `{value}` without a group).
std::vector<int64_t> values_of_ranks(const ProcessGroupPtr& group, int64_t value);

/// Every rank's `values`, by rank (one all-gather; `{values}` without a group; nothing sent when
/// they are empty). Every rank gives as many values.
std::vector<std::vector<int64_t>> vectors_of_ranks(const ProcessGroupPtr& group,
                                                   const std::vector<int64_t>& values);

/// Every rank's `error` ("" where a rank succeeded) as "rank 1: ...; rank 3: ...", the same on
/// every rank; "" when no rank failed (then one all-reduce, whatever the world size). `rank`
/// names this process without a group.
std::string failures_of_ranks(const ProcessGroupPtr& group, int rank, const std::string& error);

}  // namespace dcpp::detail
