// The plugin's agreements (contracts in rank_agreement.h), on core's GroupCalls: one all-reduce or
// broadcast of int64s each; a text as its size, then its bytes.

#include "rank_agreement.h"

#include "core/group_calls.h"

#include <ATen/ATen.h>

#include <algorithm>

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

std::vector<int64_t> values_of_ranks(const ProcessGroupPtr& group, int64_t value) {
  if (!group) return {value};
  std::vector<int64_t> values;
  for (const at::Tensor& each :
       calls_on(group).all_gather(at::full({1}, value, at::kLong), "the ranks' values")) {
    values.push_back(each.item<int64_t>());
  }
  return values;
}

std::vector<std::vector<int64_t>> vectors_of_ranks(const ProcessGroupPtr& group,
                                                   const std::vector<int64_t>& values) {
  if (!group) return {values};
  // Every rank gives as many values: none on one is none on all (Gloo divides by the count).
  if (values.empty()) return std::vector<std::vector<int64_t>>(group->getSize());
  const at::Tensor mine =
      at::tensor(c10::ArrayRef<int64_t>(values), at::TensorOptions().dtype(at::kLong)).clone();
  std::vector<std::vector<int64_t>> all;
  for (const at::Tensor& each : calls_on(group).all_gather(mine, "the ranks' values")) {
    const int64_t* data = each.data_ptr<int64_t>();
    all.emplace_back(data, data + each.numel());
  }
  return all;
}

std::string failures_of_ranks(const ProcessGroupPtr& group, int rank, const std::string& error) {
  if (!group) return error.empty() ? "" : "rank " + std::to_string(rank) + ": " + error;
  GroupCalls calls = calls_on(group);
  const int64_t length = static_cast<int64_t>(error.size());
  if (calls.all_reduce(length, c10d::ReduceOp::MAX, "the ranks' outcomes") == 0) return "";
  const std::vector<at::Tensor> lengths =
      calls.all_gather(at::full({1}, length, at::kLong), "the lengths of the ranks' errors");
  int64_t longest = 0;
  for (const at::Tensor& each : lengths) longest = std::max(longest, each.item<int64_t>());
  at::Tensor bytes = at::zeros({longest}, at::kByte);
  std::copy(error.begin(), error.end(), bytes.data_ptr<uint8_t>());
  const std::vector<at::Tensor> texts = calls.all_gather(bytes, "the ranks' errors");
  std::string failures;
  for (size_t r = 0; r < texts.size(); ++r) {
    const int64_t size = lengths[r].item<int64_t>();
    if (size == 0) continue;
    const at::Tensor text = texts[r].to(at::kCPU).contiguous();
    failures += (failures.empty() ? "rank " : "; rank ") + std::to_string(r) + ": " +
                std::string(reinterpret_cast<const char*>(text.data_ptr<uint8_t>()), size);
  }
  return failures;
}

}  // namespace dcpp::detail
