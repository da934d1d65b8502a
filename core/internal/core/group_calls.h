#pragma once
// The one place dcpp calls c10d collectives: blocking calls on a process group, each waiting for
// its Work and turning a c10d failure (a dead peer, a timeout) into a CheckpointError that names
// the caller, this rank and the operation.
//
// Every call is collective (send and recv: point to point): every rank of the group makes the same
// calls in the same order. Not thread-safe. A null group is this process alone, rank 0 of 1: the
// collectives then return their input.

#include <dcpp/core/checkpoint_error.h>

#include <ATen/core/Tensor.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace dcpp::detail {

class GroupCalls {
 public:
  /// `caller` starts every error message ("DataParallel", "state dict", "checkpoint"). When a call
  /// fails, `explain_failure` (when given) adds what is known of the peers, e.g. which has exited.
  GroupCalls(c10::intrusive_ptr<c10d::ProcessGroup> group, std::string caller,
             std::function<std::string()> explain_failure = {});

  int rank() const;
  int size() const;
  const c10::intrusive_ptr<c10d::ProcessGroup>& group() const { return group_; }

  /// The device this group's messages travel on: the CPU when it takes CPU tensors (Gloo, or a 2.x
  /// group with a CPU backend); else (an NCCL-only group) this rank's current CUDA device, as DCP's
  /// object collectives do. The latter fails at run time where libtorch has no CUDA.
  at::Device message_device() const;

  /// In place, every tensor: `root`'s values.
  void broadcast(std::vector<at::Tensor>& tensors, int root, const std::string& what);
  /// In place, every tensor: the element-wise reduction over the ranks.
  void all_reduce(std::vector<at::Tensor>& tensors, c10d::ReduceOp op, const std::string& what);
  /// Every rank's `tensor` (the same shape and dtype on every rank), in rank order, on its device.
  std::vector<at::Tensor> all_gather(const at::Tensor& tensor, const std::string& what);
  /// Point to point: sends `tensor` to `peer` / receives into `tensor` (contiguous) from `peer`.
  /// Without a group there is no peer: CheckpointError (kUsage).
  void send(const at::Tensor& tensor, int peer, int tag, const std::string& what);
  void recv(at::Tensor& tensor, int peer, int tag, const std::string& what);
  /// The send of `tensor` (contiguous) to `peer`, started and not waited for: wait for it with
  /// wait(), keeping `tensor` alive and unchanged until then. Peers that send to each other start
  /// their sends, then receive: blocking sends would wait on each other.
  c10::intrusive_ptr<c10d::Work> start_send(const at::Tensor& tensor, int peer, int tag,
                                            const std::string& what);
  /// Waits for `work`; throws as the blocking calls do when it failed.
  void wait(const c10::intrusive_ptr<c10d::Work>& work, const std::string& what) const;

  /// The reduction of `value` over the ranks.
  int64_t all_reduce(int64_t value, c10d::ReduceOp op, const std::string& what);
  /// The element-wise reduction of `values` (the same length on every rank).
  std::vector<int64_t> all_reduce(std::vector<int64_t> values, c10d::ReduceOp op,
                                  const std::string& what);
  /// `root`'s `bytes` on every rank (the argument is ignored elsewhere): its length, then the
  /// bytes, on message_device().
  std::string broadcast_bytes(const std::string& bytes, int root, const std::string& what);

  /// Throws CheckpointError(kind, "<caller> on rank R of N: <message>"). The collectives' own
  /// failures (a dead peer, a timeout) are ErrorKind::kRankFailed.
  [[noreturn]] void fail(ErrorKind kind, const std::string& message) const;

 private:
  c10::intrusive_ptr<c10d::ProcessGroup> group_;
  std::string caller_;
  std::function<std::string()> explain_failure_;
};

}  // namespace dcpp::detail
