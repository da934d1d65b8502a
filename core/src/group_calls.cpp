#include "core/group_calls.h"

#include <dcpp/core/checkpoint_error.h>
#include <dcpp/core/torch_compat.h>

#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <ATen/detail/CUDAHooksInterface.h>

#include <cstring>

namespace dcpp::detail {

namespace {

GroupReach reach_of(const c10::intrusive_ptr<c10d::ProcessGroup>& group) {
  if (!group) return GroupReach{};
  const std::string cuda = compat::backend_for(*group, c10::DeviceType::CUDA);
  GroupReach reach;
  reach.cpu = !compat::backend_for(*group, c10::DeviceType::CPU).empty();
  reach.cuda = !cuda.empty();
  reach.cuda_point_to_point = reach.cuda && cuda != "gloo";
  return reach;
}

}  // namespace

GroupCalls::GroupCalls(c10::intrusive_ptr<c10d::ProcessGroup> group, std::string caller,
                       std::function<std::string()> explain_failure)
    : group_(std::move(group)),
      caller_(std::move(caller)),
      explain_failure_(std::move(explain_failure)),
      reach_(reach_of(group_)) {}

int GroupCalls::rank() const { return group_ ? group_->getRank() : 0; }

int GroupCalls::size() const { return group_ ? group_->getSize() : 1; }

at::Device GroupCalls::message_device() const {
  if (reach_.cpu) return at::kCPU;
  if (!at::globalContext().hasCUDA()) {
    fail(ErrorKind::kUsage,
         "the process group (backend '" + group_->getBackendName() +
             "') takes no CPU tensors and this process sees no CUDA device to send its messages "
             "through; give it a Gloo group, or one with a CPU backend");
  }
  return {at::kCUDA, static_cast<c10::DeviceIndex>(at::detail::getCUDAHooks().current_device())};
}

void GroupCalls::fail(ErrorKind kind, const std::string& message) const {
  throw CheckpointError(kind, caller_ + " on rank " + std::to_string(rank()) + " of " +
                                  std::to_string(size()) + ": " + message);
}

std::vector<at::Tensor> GroupCalls::on_wire(const std::vector<at::Tensor>& tensors,
                                            bool point_to_point) const {
  std::vector<at::Tensor> wire;
  wire.reserve(tensors.size());
  for (const at::Tensor& tensor : tensors) {
    const at::Device target =
        wire_device(reach_, tensor.device(), point_to_point, message_device());
    wire.push_back(target == tensor.device() ? tensor : tensor.to(target));
  }
  return wire;
}

void GroupCalls::land(const std::vector<at::Tensor>& wire, std::vector<at::Tensor>& tensors) {
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    if (!wire[i].is_same(tensors[i])) tensors[i].copy_(wire[i]);
  }
}

template <typename Start>
c10::intrusive_ptr<c10d::Work> GroupCalls::started(ErrorKind kind, const std::string& what,
                                                   Start&& start) const {
  try {
    return start();
  } catch (const CheckpointError&) {
    throw;
  } catch (const std::exception& error) {
    fail(kind, "the process group (backend '" + group_->getBackendName() + "') refused " + what +
                   ": " + error.what());
  }
}

void GroupCalls::wait(const c10::intrusive_ptr<c10d::Work>& work, const std::string& what) const {
  try {
    work->wait();
  } catch (const std::exception& error) {
    const std::string cause = explain_failure_
                                  ? explain_failure_()
                                  : "a rank died, timed out or called another collective";
    fail(ErrorKind::kRankFailed,
         what + " failed: " + cause + ". The process group said: " + error.what());
  }
}

void GroupCalls::broadcast(std::vector<at::Tensor>& tensors, int root, const std::string& what) {
  if (!group_) return;
  c10d::BroadcastOptions options;
  options.rootRank = root;
  std::vector<at::Tensor> wire = on_wire(tensors, false);
  const std::string call = "broadcast of " + what;
  wait(started(ErrorKind::kUsage, call, [&] { return group_->broadcast(wire, options); }), call);
  land(wire, tensors);
}

void GroupCalls::all_reduce(std::vector<at::Tensor>& tensors, c10d::ReduceOp op,
                            const std::string& what) {
  if (!group_) return;
  c10d::AllreduceOptions options;
  options.reduceOp = op;
  std::vector<at::Tensor> wire = on_wire(tensors, false);
  const std::string call = "all-reduce of " + what;
  wait(started(ErrorKind::kUsage, call, [&] { return group_->allreduce(wire, options); }), call);
  land(wire, tensors);
}

std::vector<at::Tensor> GroupCalls::all_gather(const at::Tensor& tensor, const std::string& what) {
  if (!group_) return {tensor};
  std::vector<at::Tensor> inputs = on_wire({tensor}, false);
  std::vector<std::vector<at::Tensor>> outputs(1);
  for (int r = 0; r < size(); ++r) {
    outputs[0].push_back(at::empty_like(inputs[0]));
  }
  const std::string call = "all-gather of " + what;
  wait(started(ErrorKind::kUsage, call, [&] { return group_->allgather(outputs, inputs); }), call);
  if (!inputs[0].is_same(tensor)) {
    for (at::Tensor& output : outputs[0]) output = output.to(tensor.device());
  }
  return std::move(outputs[0]);
}

void GroupCalls::send(const at::Tensor& tensor, int peer, int tag, const std::string& what) {
  if (!group_) fail(ErrorKind::kUsage, "sending " + what + " needs a process group");
  std::vector<at::Tensor> buffers = on_wire({tensor.contiguous()}, true);
  const std::string call = "sending " + what + " to rank " + std::to_string(peer);
  wait(started(ErrorKind::kRankFailed, call, [&] { return group_->send(buffers, peer, tag); }),
       call);
}

c10::intrusive_ptr<c10d::Work> GroupCalls::start_send(const at::Tensor& tensor, int peer, int tag,
                                                      const std::string& what) {
  if (!group_) fail(ErrorKind::kUsage, "sending " + what + " needs a process group");
  std::vector<at::Tensor> buffers = on_wire({tensor}, true);
  if (!buffers[0].is_same(tensor)) moved_sends_.push_back(buffers[0]);
  return started(ErrorKind::kRankFailed, "sending " + what + " to rank " + std::to_string(peer),
                 [&] { return group_->send(buffers, peer, tag); });
}

void GroupCalls::recv(at::Tensor& tensor, int peer, int tag, const std::string& what) {
  if (!group_) fail(ErrorKind::kUsage, "receiving " + what + " needs a process group");
  std::vector<at::Tensor> targets{tensor};
  std::vector<at::Tensor> buffers = on_wire(targets, true);
  const std::string call = "receiving " + what + " from rank " + std::to_string(peer);
  wait(started(ErrorKind::kRankFailed, call, [&] { return group_->recv(buffers, peer, tag); }),
       call);
  land(buffers, targets);
}

std::vector<int64_t> GroupCalls::all_reduce(std::vector<int64_t> values, c10d::ReduceOp op,
                                            const std::string& what) {
  if (!group_ || values.empty()) return values;
  std::vector<at::Tensor> tensors{at::tensor(values, at::TensorOptions().dtype(at::kLong))};
  all_reduce(tensors, op, what);
  std::memcpy(values.data(), tensors[0].data_ptr<int64_t>(), values.size() * sizeof(int64_t));
  return values;
}

int64_t GroupCalls::all_reduce(int64_t value, c10d::ReduceOp op, const std::string& what) {
  return all_reduce(std::vector<int64_t>{value}, op, what)[0];
}

std::string GroupCalls::broadcast_bytes(const std::string& bytes, int root,
                                        const std::string& what) {
  if (!group_) return bytes;
  std::vector<at::Tensor> length{
      at::full({1}, static_cast<int64_t>(bytes.size()), at::TensorOptions().dtype(at::kLong))};
  broadcast(length, root, "the size of " + what);
  const int64_t n = length[0].item<int64_t>();
  std::vector<at::Tensor> payload{at::zeros({std::max<int64_t>(n, 1)}, at::kByte)};
  if (rank() == root && n > 0) {
    std::memcpy(payload[0].data_ptr(), bytes.data(), bytes.size());
  }
  broadcast(payload, root, what);
  return std::string(static_cast<const char*>(payload[0].data_ptr()), static_cast<std::size_t>(n));
}

}  // namespace dcpp::detail
