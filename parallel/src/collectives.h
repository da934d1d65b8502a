#pragma once
// Blocking c10d collectives for the parallel wrappers: each waits for its Work and turns a c10d
// failure (a dead peer, a timeout) into a CheckpointError naming the wrapper, the rank and the
// operation. Like every c10d call, they must be made in the same order on every rank of the group
// and are not thread-safe.

#include <dcpp/core/checkpoint_error.h>

#include <ATen/core/Tensor.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include <string>
#include <vector>

namespace dcpp::detail {

/// Who is calling, for error messages: "DataParallel", "FullyShardedDataParallel", ...
struct CollectiveContext {
  std::string wrapper;
  c10::intrusive_ptr<c10d::ProcessGroup> group;
};

/// Every tensor of `tensors` from `root`, in place (one collective per dtype, flattened).
void broadcast_tensors(const CollectiveContext& context, const std::vector<at::Tensor>& tensors,
                       int root, const std::string& what);

/// In place: the element-wise sum over the ranks of `flat` (contiguous).
void allreduce_sum(const CollectiveContext& context, at::Tensor& flat, const std::string& what);

/// Each rank's `flat` (same shape on every rank), in rank order.
std::vector<at::Tensor> allgather(const CollectiveContext& context, const at::Tensor& flat,
                                  const std::string& what);

/// Point to point: sends `tensor` (contiguous) to `peer` / receives into it from `peer`.
void send(const CollectiveContext& context, at::Tensor tensor, int peer, int tag,
          const std::string& what);
void recv(const CollectiveContext& context, at::Tensor& tensor, int peer, int tag,
          const std::string& what);

/// The tensors' contents laid end to end, grouped by dtype: one flat buffer per dtype and which
/// tensors it holds, in order.
struct FlatGroup {
  at::Tensor flat;
  std::vector<std::size_t> members;
};
std::vector<FlatGroup> group_by_dtype(const std::vector<at::Tensor>& tensors);

/// Throws CheckpointError(kind, "<wrapper>: rank R of N: <message>").
[[noreturn]] void fail(ErrorKind kind, const CollectiveContext& context,
                       const std::string& message);

}  // namespace dcpp::detail
