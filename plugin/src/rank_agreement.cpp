// The plugin's collectives on c10d (contracts in rank_agreement.h): CPU tensors of int64 (or of
// bytes, for a text), one all-reduce or broadcast each; a text is broadcast as its size, then (when
// not empty) its bytes.

#include "rank_agreement.h"

#include <ATen/ATen.h>

#include <cstring>

namespace dcpp::detail {

namespace {

// Collective: `tensor` reduced with `op` over the ranks, in place.
void all_reduce_in_place(const ProcessGroupPtr& group, const at::Tensor& tensor,
                         c10d::ReduceOp op) {
  std::vector<at::Tensor> tensors{tensor};
  c10d::AllreduceOptions options;
  options.reduceOp = op;
  group->allreduce(tensors, options)->wait();
}

// Collective: `root`'s `tensor` into every rank's `tensor`, in place.
void broadcast_in_place(const ProcessGroupPtr& group, const at::Tensor& tensor, int root) {
  std::vector<at::Tensor> tensors{tensor};
  c10d::BroadcastOptions options;
  options.rootRank = root;
  group->broadcast(tensors, options)->wait();
}

}  // namespace

bool every_rank_ok(const ProcessGroupPtr& group, bool ok) {
  if (!group) return ok;
  const at::Tensor all_ok = at::full({1}, ok ? 1 : 0, at::kLong);
  all_reduce_in_place(group, all_ok, c10d::ReduceOp::MIN);
  return all_ok.item<int64_t>() != 0;
}

std::vector<int64_t> max_over_ranks(const ProcessGroupPtr& group, std::vector<int64_t> flags) {
  if (!group) return flags;
  const at::Tensor maxima = at::tensor(flags, at::TensorOptions().dtype(at::kLong));
  all_reduce_in_place(group, maxima, c10d::ReduceOp::MAX);
  for (size_t i = 0; i < flags.size(); ++i) flags[i] = maxima[i].item<int64_t>();
  return flags;
}

int64_t broadcast_from(const ProcessGroupPtr& group, int64_t value, int root) {
  if (!group) return value;
  const at::Tensor broadcast = at::full({1}, value, at::kLong);
  broadcast_in_place(group, broadcast, root);
  return broadcast.item<int64_t>();
}

std::string broadcast_text_from(const ProcessGroupPtr& group, const std::string& text, int root) {
  if (!group) return text;
  const int64_t size = broadcast_from(group, static_cast<int64_t>(text.size()), root);
  if (size == 0) return {};
  const at::Tensor bytes = at::empty({size}, at::kByte);
  if (group->getRank() == root) std::memcpy(bytes.data_ptr(), text.data(), text.size());
  broadcast_in_place(group, bytes, root);
  return std::string(static_cast<const char*>(bytes.data_ptr()), static_cast<size_t>(size));
}

}  // namespace dcpp::detail
