#include "core/group_calls.h"

#include <dcpp/core/checkpoint_error.h>
#include <dcpp/core/torch_compat.h>

#include <ATen/ATen.h>
#include <ATen/detail/CUDAHooksInterface.h>

#include <cstring>

namespace dcpp::detail {

GroupCalls::GroupCalls(c10::intrusive_ptr<c10d::ProcessGroup> group, std::string caller,
                       std::function<std::string()> explain_failure)
    : group_(std::move(group)),
      caller_(std::move(caller)),
      explain_failure_(std::move(explain_failure)) {}

int GroupCalls::rank() const { return group_ ? group_->getRank() : 0; }

int GroupCalls::size() const { return group_ ? group_->getSize() : 1; }

at::Device GroupCalls::message_device() const {
  if (!group_ || compat::carries_cpu_tensors(*group_)) {
    return at::kCPU;
  }
  return {at::kCUDA, static_cast<c10::DeviceIndex>(at::detail::getCUDAHooks().current_device())};
}

void GroupCalls::fail(ErrorKind kind, const std::string& message) const {
  throw CheckpointError(kind, caller_ + " on rank " + std::to_string(rank()) + " of " +
                                  std::to_string(size()) + ": " + message);
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
  wait(group_->broadcast(tensors, options), "broadcast of " + what);
}

void GroupCalls::all_reduce(std::vector<at::Tensor>& tensors, c10d::ReduceOp op,
                            const std::string& what) {
  if (!group_) return;
  c10d::AllreduceOptions options;
  options.reduceOp = op;
  wait(group_->allreduce(tensors, options), "all-reduce of " + what);
}

std::vector<at::Tensor> GroupCalls::all_gather(const at::Tensor& tensor, const std::string& what) {
  if (!group_) return {tensor};
  std::vector<at::Tensor> inputs{tensor};
  std::vector<std::vector<at::Tensor>> outputs(1);
  for (int r = 0; r < size(); ++r) {
    outputs[0].push_back(at::empty_like(tensor));
  }
  wait(group_->allgather(outputs, inputs), "all-gather of " + what);
  return std::move(outputs[0]);
}

void GroupCalls::send(const at::Tensor& tensor, int peer, int tag, const std::string& what) {
  if (!group_) fail(ErrorKind::kUsage, "sending " + what + " needs a process group");
  std::vector<at::Tensor> buffers{tensor.contiguous()};
  wait(group_->send(buffers, peer, tag), "sending " + what + " to rank " + std::to_string(peer));
}

c10::intrusive_ptr<c10d::Work> GroupCalls::start_send(const at::Tensor& tensor, int peer, int tag,
                                                      const std::string& what) {
  if (!group_) fail(ErrorKind::kUsage, "sending " + what + " needs a process group");
  std::vector<at::Tensor> buffers{tensor};
  try {
    return group_->send(buffers, peer, tag);
  } catch (const std::exception& error) {
    fail(ErrorKind::kRankFailed,
         "sending " + what + " to rank " + std::to_string(peer) + " failed: " + error.what());
  }
}

void GroupCalls::recv(at::Tensor& tensor, int peer, int tag, const std::string& what) {
  if (!group_) fail(ErrorKind::kUsage, "receiving " + what + " needs a process group");
  std::vector<at::Tensor> buffers{tensor};
  wait(group_->recv(buffers, peer, tag),
       "receiving " + what + " from rank " + std::to_string(peer));
}

std::vector<int64_t> GroupCalls::all_reduce(std::vector<int64_t> values, c10d::ReduceOp op,
                                            const std::string& what) {
  if (!group_ || values.empty()) return values;
  std::vector<at::Tensor> tensors{
      at::tensor(values, at::TensorOptions().dtype(at::kLong)).to(message_device())};
  all_reduce(tensors, op, what);
  const at::Tensor reduced = tensors[0].cpu();
  std::memcpy(values.data(), reduced.data_ptr<int64_t>(), values.size() * sizeof(int64_t));
  return values;
}

int64_t GroupCalls::all_reduce(int64_t value, c10d::ReduceOp op, const std::string& what) {
  return all_reduce(std::vector<int64_t>{value}, op, what)[0];
}

std::string GroupCalls::broadcast_bytes(const std::string& bytes, int root,
                                        const std::string& what) {
  if (!group_) return bytes;
  const at::Device device = message_device();
  std::vector<at::Tensor> length{
      at::full({1}, static_cast<int64_t>(bytes.size()), at::TensorOptions().dtype(at::kLong))
          .to(device)};
  broadcast(length, root, "the size of " + what);
  const int64_t n = length[0].item<int64_t>();
  at::Tensor data = at::zeros({std::max<int64_t>(n, 1)}, at::kByte);
  if (rank() == root && n > 0) {
    std::memcpy(data.data_ptr(), bytes.data(), bytes.size());
  }
  std::vector<at::Tensor> payload{data.to(device)};
  broadcast(payload, root, what);
  data = payload[0].cpu();
  return std::string(static_cast<const char*>(data.data_ptr()), static_cast<std::size_t>(n));
}

}  // namespace dcpp::detail
