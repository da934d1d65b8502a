// The plugin's agreements (contracts in rank_agreement.h), on core's GroupCalls: one all-reduce or
// broadcast of int64s each; a text as its size, then its bytes.

#include "rank_agreement.h"

#include "core/group_calls.h"

#include <ATen/ATen.h>

namespace dcpp::detail {

namespace {

GroupCalls calls_on(const ProcessGroupPtr& group) {
  return GroupCalls(group, "checkpoint manager");
}

}  // namespace

bool every_rank_ok(const ProcessGroupPtr& group, bool ok) {
  return calls_on(group).all_reduce(ok ? 1 : 0, c10d::ReduceOp::MIN, "the ranks' outcomes") != 0;
}

std::vector<int64_t> max_over_ranks(const ProcessGroupPtr& group, std::vector<int64_t> flags) {
  return calls_on(group).all_reduce(std::move(flags), c10d::ReduceOp::MAX, "the ranks' flags");
}

int64_t broadcast_from(const ProcessGroupPtr& group, int64_t value, int root) {
  std::vector<at::Tensor> tensors{at::full({1}, value, at::kLong)};
  GroupCalls calls = calls_on(group);
  calls.broadcast(tensors, root, "the coordinator's choice");
  return tensors[0].item<int64_t>();
}

std::string broadcast_text_from(const ProcessGroupPtr& group, const std::string& text, int root) {
  return calls_on(group).broadcast_bytes(text, root, "the coordinator's message");
}

}  // namespace dcpp::detail
