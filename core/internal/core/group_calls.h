#pragma once
// The one place dcpp calls c10d collectives: blocking calls on a process group, each waiting for
// its Work and turning a c10d failure (a dead peer, a timeout) into a CheckpointError that names
// the caller, this rank and the operation.
//
// Every call is collective (send and recv: point to point): every rank of the group makes the same
// calls in the same order. Not thread-safe. A null group is this process alone, rank 0 of 1: the
// collectives then return their input.
//
// Tensors of any device may be given: each travels on a device the group takes for that call
// (group_reach.h: a CPU tensor through an NCCL-only group on this rank's CUDA device, a CUDA tensor
// through Gloo's send and recv on the CPU), and the results land on the caller's tensors' devices.
// A call c10d refuses to start is a CheckpointError too (kUsage; kRankFailed for send and recv,
// which fail to start when the peer is gone).

#include <dcpp/core/checkpoint_error.h>

#include "core/group_reach.h"

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
  /// group with a CPU backend); else (an NCCL-only group) the calling thread's current CUDA device,
  /// as DCP's object collectives do. Where this process has no CUDA device, such a group is a
  /// CheckpointError (kUsage).
  at::Device message_device() const;

  /// In place, every tensor: `root`'s values.
  void broadcast(std::vector<at::Tensor>& tensors, int root, const std::string& what);
  /// In place, every tensor: the element-wise reduction over the ranks.
  void all_reduce(std::vector<at::Tensor>& tensors, c10d::ReduceOp op, const std::string& what);
  /// Every rank's `tensor` (the same shape and dtype on every rank), in rank order, on the device
  /// of `tensor`.
  std::vector<at::Tensor> all_gather(const at::Tensor& tensor, const std::string& what);
  /// Point to point: sends `tensor` to `peer` / receives into `tensor` (contiguous) from `peer`.
  /// Without a group there is no peer: CheckpointError (kUsage).
  void send(const at::Tensor& tensor, int peer, int tag, const std::string& what);
  void recv(at::Tensor& tensor, int peer, int tag, const std::string& what);
  /// The send of `tensor` (contiguous) to `peer`, started and not waited for: wait for it with
  /// wait(), keeping `tensor` alive and unchanged until then (a copy made to travel on another
  /// device is kept by this object). Peers that send to each other start
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
  // `tensors` as they travel (wire_device of each); the same tensor objects where they need no
  // move.
  std::vector<at::Tensor> on_wire(const std::vector<at::Tensor>& tensors,
                                  bool point_to_point) const;
  // Copies what arrived in `wire` into `tensors` where on_wire moved them.
  static void land(const std::vector<at::Tensor>& wire, std::vector<at::Tensor>& tensors);
  // `start()`'s work; what c10d throws while starting it becomes CheckpointError(kind).
  template <typename Start>
  c10::intrusive_ptr<c10d::Work> started(ErrorKind kind, const std::string& what,
                                         Start&& start) const;

  c10::intrusive_ptr<c10d::ProcessGroup> group_;
  std::string caller_;
  std::function<std::string()> explain_failure_;
  GroupReach reach_;
  std::vector<at::Tensor> moved_sends_;  // start_send's copies made to travel, alive until we are
};

}  // namespace dcpp::detail
