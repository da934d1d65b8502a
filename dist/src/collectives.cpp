// Byte collectives over c10d (collectives.h). Variable-length messages travel as a length, then
// the bytes; gather and scatter are point to point with the root, so a rank other than the root
// sends and receives its own messages only.

#include "dist/collectives.h"

#include "peer_processes.h"

#include "core/group_calls.h"

#include <dcpp/core/checkpoint_error.h>
#include <dcpp/dist/checkpoint_traffic.h>

#include <ATen/ATen.h>

#include <atomic>
#include <cstring>

namespace dcpp {

namespace {

std::atomic<int64_t> bytes_sent{0}, bytes_received{0}, messages_sent{0}, messages_received{0};

void count_sent(int64_t bytes, int64_t messages = 1) {
  bytes_sent += bytes;
  messages_sent += messages;
}

void count_received(int64_t bytes, int64_t messages = 1) {
  bytes_received += bytes;
  messages_received += messages;
}

}  // namespace

CheckpointTraffic checkpoint_traffic() {
  return CheckpointTraffic{bytes_sent.load(), bytes_received.load(), messages_sent.load(),
                           messages_received.load()};
}

namespace detail {

namespace {

constexpr int64_t kLengthBytes = sizeof(int64_t);
constexpr int kMessageTag = 0;  // messages between two ranks arrive in the order they were sent

class SingleProcess final : public Collectives {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::vector<std::string> all_gather(const std::string& bytes) override { return {bytes}; }
  std::string broadcast(const std::string& bytes, int root) override { return bytes; }
  std::vector<std::string> gather(const std::string& bytes, int root) override { return {bytes}; }
  std::string scatter(const std::vector<std::string>& per_rank, int root) override {
    return per_rank.at(0);
  }
  std::vector<int64_t> max_over_ranks(std::vector<int64_t> values) override { return values; }
  void send(const std::string& bytes, int peer) override { no_peer(peer); }
  std::string receive(int peer) override { no_peer(peer); }

 private:
  [[noreturn]] static void no_peer(int peer) {
    throw CheckpointError(ErrorKind::kUsage, "checkpoint: rank " + std::to_string(peer) +
                                                 " is not a peer of a process alone");
  }
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

  std::vector<std::string> all_gather(const std::string& bytes) override {
    know_peers();
    return gather_padded(bytes);
  }

  std::string broadcast(const std::string& bytes, int root) override {
    know_peers();
    std::string out = calls_.broadcast_bytes(bytes, root, "a message");
    if (rank() == root) {
      count_sent(kLengthBytes + static_cast<int64_t>(bytes.size()));
    } else {
      count_received(kLengthBytes + static_cast<int64_t>(out.size()));
    }
    return out;
  }

  std::vector<std::string> gather(const std::string& bytes, int root) override {
    know_peers();
    if (rank() != root) {
      send_bytes(bytes, root, "a message to the coordinator");
      return {};
    }
    std::vector<std::string> out(static_cast<std::size_t>(size()));
    for (int peer = 0; peer < size(); ++peer) {
      out[static_cast<std::size_t>(peer)] =
          peer == root ? bytes : receive_bytes(peer, "the message of rank " + std::to_string(peer));
    }
    return out;
  }

  std::string scatter(const std::vector<std::string>& per_rank, int root) override {
    know_peers();
    if (rank() != root) {
      return receive_bytes(root, "this rank's message from the coordinator");
    }
    if (per_rank.size() != static_cast<std::size_t>(size())) {
      calls_.fail(ErrorKind::kUsage, "scatter from rank " + std::to_string(root) + " got " +
                                         std::to_string(per_rank.size()) + " messages for " +
                                         std::to_string(size()) + " ranks");
    }
    for (int peer = 0; peer < size(); ++peer) {
      if (peer != root) {
        send_bytes(per_rank[static_cast<std::size_t>(peer)], peer,
                   "the message of rank " + std::to_string(peer));
      }
    }
    return per_rank[static_cast<std::size_t>(root)];
  }

  std::vector<int64_t> max_over_ranks(std::vector<int64_t> values) override {
    know_peers();
    const int64_t bytes = kLengthBytes * static_cast<int64_t>(values.size());
    values = calls_.all_reduce(std::move(values), c10d::ReduceOp::MAX, "the ranks' status");
    count_sent(bytes);
    count_received(bytes);
    return values;
  }

  void send(const std::string& bytes, int peer) override {
    know_peers();
    send_bytes(bytes, peer, "a message to rank " + std::to_string(peer));
  }

  std::string receive(int peer) override {
    know_peers();
    return receive_bytes(peer, "a message from rank " + std::to_string(peer));
  }

 private:
  // Every rank's process identity, once, so that a later failure can name the rank whose process
  // has exited.
  void know_peers() {
    if (!peers_.empty()) return;
    std::vector<std::string> identities = gather_padded(encode_process_identity(this_process()));
    std::vector<ProcessIdentity> peers;
    for (const std::string& identity : identities) {
      peers.push_back(decode_process_identity(identity, static_cast<int>(peers.size())));
    }
    peers_ = std::move(peers);
  }

  void send_bytes(const std::string& bytes, int peer, const std::string& what) {
    const auto length = static_cast<int64_t>(bytes.size());
    calls_.send(at::full({1}, length, at::TensorOptions().dtype(at::kLong)).to(device_), peer,
                kMessageTag, "the size of " + what);
    if (length > 0) {
      at::Tensor payload = at::empty({length}, at::kByte);
      std::memcpy(payload.data_ptr(), bytes.data(), bytes.size());
      calls_.send(payload.to(device_), peer, kMessageTag, what);
    }
    count_sent(kLengthBytes + length, length > 0 ? 2 : 1);
  }

  std::string receive_bytes(int peer, const std::string& what) {
    at::Tensor length_tensor = at::empty({1}, at::TensorOptions().dtype(at::kLong).device(device_));
    calls_.recv(length_tensor, peer, kMessageTag, "the size of " + what);
    const int64_t length = length_tensor.cpu().item<int64_t>();
    if (length < 0) {
      calls_.fail(ErrorKind::kCorrupt, "rank " + std::to_string(peer) + " announced " + what +
                                           " of " + std::to_string(length) +
                                           " bytes; every rank must run the same dcpp build");
    }
    std::string out;
    if (length > 0) {
      at::Tensor payload;
      try {
        payload = at::empty({length}, at::TensorOptions().dtype(at::kByte).device(device_));
      } catch (const std::exception& error) {
        calls_.fail(ErrorKind::kIo, "cannot hold " + what + ", " + std::to_string(length) +
                                        " bytes from rank " + std::to_string(peer) + ": " +
                                        error.what() + "; give this rank more memory");
      }
      calls_.recv(payload, peer, kMessageTag, what);
      const at::Tensor on_cpu = payload.cpu();
      out.assign(static_cast<const char*>(on_cpu.data_ptr()), static_cast<std::size_t>(length));
    }
    count_received(kLengthBytes + length, length > 0 ? 2 : 1);
    return out;
  }

  // Every rank's `bytes` on every rank, each padded to the longest: two all-gathers.
  std::vector<std::string> gather_padded(const std::string& bytes) {
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
    const int64_t message = kLengthBytes + mine.numel();
    count_sent(message, 2);
    count_received(message * (n - 1), 2 * static_cast<int64_t>(n - 1));
    return out;
  }

  // [size, ...] stack of every rank's CPU `tensor` (all ranks pass the same shape), on the CPU.
  at::Tensor gather_tensor(const at::Tensor& tensor, const char* what) {
    return at::stack(calls_.all_gather(tensor.to(device_), what)).cpu();
  }

  // Which peer process has exited, once the ranks told each other who they are.
  std::string describe_peers() const {
    return peers_.empty() ? "the ranks failed before they first exchanged messages, so the rank "
                            "that died cannot be named"
                          : describe_peer_processes(peers_, rank());
  }

  GroupCalls calls_;
  at::Device device_;
  std::vector<ProcessIdentity> peers_;  // by rank; empty until the first call
};

}  // namespace

std::unique_ptr<Collectives> make_single_process_collectives() {
  return std::make_unique<SingleProcess>();
}

std::unique_ptr<Collectives> make_process_group_collectives(
    c10::intrusive_ptr<c10d::ProcessGroup> group) {
  return std::make_unique<OverProcessGroup>(std::move(group));
}

}  // namespace detail

}  // namespace dcpp
