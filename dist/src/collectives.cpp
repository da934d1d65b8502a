#include "dist/collectives.h"

#include "peer_processes.h"
#include "planner/plan_codec.h"

#include <dcpp/core/checkpoint_error.h>
#include <dcpp/core/torch_compat.h>

#include <ATen/ATen.h>
#include <ATen/detail/CUDAHooksInterface.h>

#include <cstring>

namespace dcpp::detail {

namespace {

class SingleProcess final : public Collectives {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::vector<std::string> all_gather(const std::string& bytes) override { return {bytes}; }
  std::string broadcast(const std::string& bytes, int root) override { return bytes; }
};

// The device a group's messages travel on: the CPU when the group takes CPU tensors (Gloo, or a
// 2.x group with a CPU backend); else, for an NCCL-only group, this rank's current CUDA device, as
// DCP's object collectives do. The latter fails at run time where libtorch has no CUDA.
at::Device message_device(c10d::ProcessGroup& group) {
  if (compat::carries_cpu_tensors(group)) {
    return at::kCPU;
  }
  return {at::kCUDA, static_cast<c10::DeviceIndex>(at::detail::getCUDAHooks().current_device())};
}

class OverProcessGroup final : public Collectives {
 public:
  explicit OverProcessGroup(c10::intrusive_ptr<c10d::ProcessGroup> group)
      : group_(std::move(group)), device_(message_device(*group_)) {}

  int rank() const override { return group_->getRank(); }
  int size() const override { return group_->getSize(); }

  // The first all-gather also carries every rank's process identity, so that a later failure
  // can name the rank whose process has exited.
  std::vector<std::string> all_gather(const std::string& bytes) override {
    if (!peers_.empty()) return gather_bytes(bytes);
    std::vector<std::string> replies =
        gather_bytes(encode_strings({encode_process_identity(this_process()), bytes}));
    std::vector<ProcessIdentity> peers;
    for (std::string& reply : replies) {
      std::vector<std::string> parts = decode_strings(reply);
      const int rank = static_cast<int>(peers.size());
      if (parts.size() != 2) {
        throw CheckpointError(ErrorKind::kCorrupt,
                              "the first checkpoint message from rank " + std::to_string(rank) +
                                  " is malformed (" + std::to_string(parts.size()) +
                                  " parts, not 2); every rank must run the same dcpp build");
      }
      peers.push_back(decode_process_identity(parts[0], rank));
      reply = std::move(parts[1]);
    }
    peers_ = std::move(peers);
    return replies;
  }

  std::string broadcast(const std::string& bytes, int root) override {
    const at::Tensor length = run_broadcast(
        at::full({1}, static_cast<int64_t>(bytes.size()), at::TensorOptions().dtype(at::kLong)),
        root);
    const int64_t n = length.item<int64_t>();
    at::Tensor data = at::zeros({std::max<int64_t>(n, 1)}, at::kByte);
    if (rank() == root) {
      std::memcpy(data.data_ptr(), bytes.data(), bytes.size());
    }
    data = run_broadcast(data, root);
    return std::string(static_cast<const char*>(data.data_ptr()), static_cast<std::size_t>(n));
  }

 private:
  std::vector<std::string> gather_bytes(const std::string& bytes) {
    const int n = size();
    const at::Tensor lengths = gather_tensor(
        at::full({1}, static_cast<int64_t>(bytes.size()), at::TensorOptions().dtype(at::kLong)));
    // Both gathers below are [size, ...] tensors on the CPU.
    int64_t longest = 0;
    for (int r = 0; r < n; ++r) {
      longest = std::max(longest, lengths[r].item<int64_t>());
    }
    at::Tensor mine = at::zeros({std::max<int64_t>(longest, 1)}, at::kByte);
    std::memcpy(mine.data_ptr(), bytes.data(), bytes.size());
    const at::Tensor all = gather_tensor(mine);
    std::vector<std::string> out(static_cast<std::size_t>(n));
    for (int r = 0; r < n; ++r) {
      const auto* data = static_cast<const char*>(all[r].data_ptr());
      out[static_cast<std::size_t>(r)].assign(data,
                                              static_cast<std::size_t>(lengths[r].item<int64_t>()));
    }
    return out;
  }

  // [size, ...] stack of every rank's CPU `tensor` (all ranks pass the same shape), on the CPU.
  at::Tensor gather_tensor(const at::Tensor& tensor) {
    std::vector<at::Tensor> inputs{tensor.to(device_)};
    std::vector<std::vector<at::Tensor>> outputs(1);
    for (int r = 0; r < size(); ++r) {
      outputs[0].push_back(at::empty_like(inputs[0]));
    }
    wait(group_->allgather(outputs, inputs), "all-gather");
    return at::stack(outputs[0]).cpu();
  }

  // The root's CPU `tensor`, on every rank, on the CPU.
  at::Tensor run_broadcast(const at::Tensor& tensor, int root) {
    std::vector<at::Tensor> tensors{tensor.to(device_)};
    c10d::BroadcastOptions options;
    options.rootRank = root;
    wait(group_->broadcast(tensors, options), "broadcast");
    return tensors[0].cpu();
  }

  void wait(const c10::intrusive_ptr<c10d::Work>& work, const char* what) {
    try {
      work->wait();
    } catch (const std::exception& error) {
      const std::string peers =
          peers_.empty() ? "the ranks failed before they first exchanged messages, so the rank "
                           "that died cannot be named"
                         : describe_peer_processes(peers_, rank());
      throw CheckpointError(ErrorKind::kRankFailed,
                            std::string("checkpoint ") + what + " on rank " +
                                std::to_string(rank()) + " of " + std::to_string(size()) +
                                " failed: " + peers + ". The process group said: " + error.what());
    }
  }

  c10::intrusive_ptr<c10d::ProcessGroup> group_;
  at::Device device_;
  std::vector<ProcessIdentity> peers_;  // by rank; empty until the first all-gather
};

}  // namespace

std::unique_ptr<Collectives> make_single_process_collectives() {
  return std::make_unique<SingleProcess>();
}

std::unique_ptr<Collectives> make_process_group_collectives(
    c10::intrusive_ptr<c10d::ProcessGroup> group) {
  return std::make_unique<OverProcessGroup>(std::move(group));
}

}  // namespace dcpp::detail
