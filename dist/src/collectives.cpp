#include "dist/collectives.h"

#include "peer_processes.h"
#include "planner/plan_codec.h"

#include "core/group_calls.h"

#include <dcpp/core/checkpoint_error.h>

#include <ATen/ATen.h>

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

class OverProcessGroup final : public Collectives {
 public:
  explicit OverProcessGroup(c10::intrusive_ptr<c10d::ProcessGroup> group)
      : calls_(std::move(group), "checkpoint", [this] { return describe_peers(); }),
        device_(calls_.message_device()) {}
  OverProcessGroup(const OverProcessGroup&) = delete;  // calls_ holds `this`
  OverProcessGroup& operator=(const OverProcessGroup&) = delete;

  int rank() const override { return calls_.rank(); }
  int size() const override { return calls_.size(); }

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
    return calls_.broadcast_bytes(bytes, root, "a message");
  }

 private:
  std::vector<std::string> gather_bytes(const std::string& bytes) {
    const int n = size();
    const at::Tensor lengths = gather_tensor(
        at::full({1}, static_cast<int64_t>(bytes.size()), at::TensorOptions().dtype(at::kLong)),
        "the message sizes");
    // Both gathers below are [size, ...] tensors on the CPU.
    int64_t longest = 0;
    for (int r = 0; r < n; ++r) {
      longest = std::max(longest, lengths[r].item<int64_t>());
    }
    at::Tensor mine = at::zeros({std::max<int64_t>(longest, 1)}, at::kByte);
    std::memcpy(mine.data_ptr(), bytes.data(), bytes.size());
    const at::Tensor all = gather_tensor(mine, "the messages");
    std::vector<std::string> out(static_cast<std::size_t>(n));
    for (int r = 0; r < n; ++r) {
      const auto* data = static_cast<const char*>(all[r].data_ptr());
      out[static_cast<std::size_t>(r)].assign(data,
                                              static_cast<std::size_t>(lengths[r].item<int64_t>()));
    }
    return out;
  }

  // [size, ...] stack of every rank's CPU `tensor` (all ranks pass the same shape), on the CPU.
  at::Tensor gather_tensor(const at::Tensor& tensor, const char* what) {
    return at::stack(calls_.all_gather(tensor.to(device_), what)).cpu();
  }

  // Which peer process has exited, once the first all-gather told every rank's identity.
  std::string describe_peers() const {
    return peers_.empty() ? "the ranks failed before they first exchanged messages, so the rank "
                            "that died cannot be named"
                          : describe_peer_processes(peers_, rank());
  }

  GroupCalls calls_;
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
