// The memory tier's replicas: cliques, and the background rounds that send each memory step to
// the peers of its clique (memory_replication.h).

#include "memory_replication.h"

#include "core/group_calls.h"
#include "core/logging.h"
#include "rank_agreement.h"

#include <dcpp/core/checkpoint_error.h>

#include <ATen/ATen.h>

#include <cstdlib>
#include <cstring>

namespace dcpp::detail {

namespace {

constexpr std::size_t kSaveIdBytes = 64;

// What a member tells its peers first in a round.
struct RoundHeader {
  int64_t has_step = 0;
  int64_t step = -1;
  int64_t bytes = 0;
  int64_t crc32 = 0;
  int64_t save_id_size = 0;
  char save_id[kSaveIdBytes] = {};
};

at::Tensor bytes_at(const void* data, int64_t size) {
  // Gloo reads a tensor it sends and writes one it receives; the sends here are of read-only
  // mappings, which it only reads.
  return at::from_blob(const_cast<void*>(data), {size}, at::TensorOptions().dtype(at::kByte));
}

// The launcher's node rank (GROUP_RANK), or -1 where it is not set.
int64_t launcher_node_rank() {
  const char* value = std::getenv("GROUP_RANK");
  return value != nullptr && *value != '\0' ? std::atoll(value) : -1;
}

}  // namespace

std::vector<int> clique_of(int rank, int world, int ranks_per_host, int replicas) {
  const int host = rank / ranks_per_host, place = rank % ranks_per_host, size = replicas + 1;
  std::vector<int> members;
  for (int h = host / size * size; h < (host / size + 1) * size; ++h) {
    const int member = h * ranks_per_host + place;
    if (member < world) members.push_back(member);
  }
  return members;
}

int ranks_per_host(const MemoryTierOptions& options) {
  if (options.ranks_per_host > 0) return options.ranks_per_host;
  const char* value = std::getenv("LOCAL_WORLD_SIZE");
  const long long parsed = value != nullptr ? std::atoll(value) : 0;
  return parsed > 0 ? static_cast<int>(parsed) : 1;
}

MemoryReplication::MemoryReplication(const MemoryTierOptions& options, std::string job, int rank,
                                     int world, int64_t max_bytes)
    : job_(std::move(job)), rank_(rank) {
  if (!options.replication_group) {
    throw CheckpointError(ErrorKind::kUsage,
                          "MemoryTierOptions: replicas need a replication_group (a process group "
                          "of every rank, for the memory tier's background thread alone)");
  }
  if (options.replication_group->getRank() != rank ||
      options.replication_group->getSize() != world) {
    throw CheckpointError(ErrorKind::kUsage,
                          "MemoryTierOptions: the replication_group must hold every rank of the "
                          "job, in the same order (rank " +
                              std::to_string(rank) + " of " + std::to_string(world) + "; it says " +
                              std::to_string(options.replication_group->getRank()) + " of " +
                              std::to_string(options.replication_group->getSize()) + ")");
  }
  calls_ = std::make_unique<GroupCalls>(options.replication_group, "memory tier replication");
  const int per_host = ranks_per_host(options);
  for (int member : clique_of(rank, world, per_host, options.replicas)) {
    if (member != rank) peers_.push_back(member);
  }
  // Every rank's host as the launcher numbers it, where it does: a clique's members must differ.
  const std::vector<int64_t> nodes =
      values_of_ranks(options.replication_group, launcher_node_rank());
  std::string same_host;
  for (int r = 0; r < world; ++r) {
    if (nodes[r] < 0) continue;
    for (int member : clique_of(r, world, per_host, options.replicas)) {
      if (member > r && nodes[member] == nodes[r]) {
        same_host += (same_host.empty() ? "" : ", ") + std::to_string(r) + " and " +
                     std::to_string(member) + " (node " + std::to_string(nodes[r]) + ")";
      }
    }
  }
  if (!same_host.empty()) {
    throw CheckpointError(ErrorKind::kUsage,
                          "memory tier replicas: ranks " + same_host +
                              " would keep each other's steps on the same host, which a lost host "
                              "takes with it; set MemoryTierOptions::ranks_per_host to the ranks "
                              "of a host (" +
                              std::to_string(per_host) + " now), or launch with LOCAL_WORLD_SIZE");
  }
  if (rank == 0 && clique_of(0, world, per_host, options.replicas).size() <
                       static_cast<std::size_t>(options.replicas) + 1) {
    logger().warn(
        "memory tier '{}': {} ranks on hosts of {} cannot keep {} replicas of each step on other "
        "hosts; the ranks of a short clique keep fewer (none on one host)",
        job_, world, per_host, options.replicas);
  }
  for (int peer : peers_) {
    replicas_.push_back(std::make_unique<MemorySlots>(job_, peer, max_bytes, 2, rank));
  }
  thread_ = std::thread([this] { run(); });
}

MemoryReplication::~MemoryReplication() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    closing_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

void MemoryReplication::wait_for_room() {
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [&] { return queue_.size() <= 1; });
}

void MemoryReplication::submit(std::optional<MemoryStep> step) {
  if (peers_.empty()) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back(std::move(step));
  }
  changed_.notify_all();
}

void MemoryReplication::drain() {
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [&] { return queue_.empty(); });
}

void MemoryReplication::release() {
  for (const std::unique_ptr<MemorySlots>& slots : replicas_) slots->release();
}

void MemoryReplication::run() {
  int64_t number = 0;
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    changed_.wait(lock, [&] { return !queue_.empty() || closing_; });
    if (queue_.empty()) return;
    const std::optional<MemoryStep> step = queue_.front();
    lock.unlock();
    if (!broken_) {
      try {
        round(step, number);
      } catch (const std::exception& e) {
        broken_ = true;
        logger().error(
            "memory tier '{}': replication stopped on rank {} ({}); its memory steps stay on "
            "this host only until the job restarts",
            job_, rank_, e.what());
      }
    }
    ++number;
    lock.lock();
    queue_.pop_front();
    changed_.notify_all();
  }
}

void MemoryReplication::round(const std::optional<MemoryStep>& step, int64_t number) {
  GroupCalls& calls = *calls_;
  // Two tags a round, so that a round's messages never match another's.
  const int tag = static_cast<int>(number % (1 << 28)) * 2;
  RoundHeader mine;
  if (step) {
    mine.has_step = 1;
    mine.step = step->step;
    mine.bytes = static_cast<int64_t>(step->bytes.size());
    mine.crc32 = step->crc32;
    mine.save_id_size = static_cast<int64_t>(std::min(step->save_id.size(), kSaveIdBytes));
    std::memcpy(mine.save_id, step->save_id.data(), static_cast<std::size_t>(mine.save_id_size));
  }
  const at::Tensor header = bytes_at(&mine, sizeof mine);
  std::vector<c10::intrusive_ptr<c10d::Work>> sends;
  for (int peer : peers_) sends.push_back(calls.start_send(header, peer, tag, "a step's header"));
  std::vector<RoundHeader> theirs(peers_.size());
  for (std::size_t i = 0; i < peers_.size(); ++i) {
    at::Tensor into = bytes_at(&theirs[i], sizeof(RoundHeader));
    calls.recv(into, peers_[i], tag, "a step's header");
  }
  for (const auto& send : sends) calls.wait(send, "sending a step's header");
  sends.clear();

  const at::Tensor payload = step ? bytes_at(step->bytes.data(), mine.bytes) : at::Tensor();
  if (step) {
    for (int peer : peers_) {
      sends.push_back(calls.start_send(payload, peer, tag + 1, "a memory step"));
    }
  }
  for (std::size_t i = 0; i < peers_.size(); ++i) {
    const RoundHeader& their = theirs[i];
    if (their.has_step == 0) continue;
    if (their.bytes < 0) {
      throw CheckpointError(ErrorKind::kCorrupt, "rank " + std::to_string(peers_[i]) +
                                                     " announced a step of a negative size");
    }
    const std::string what =
        "rank " + std::to_string(peers_[i]) + "'s step " + std::to_string(their.step);
    bool received = false;
    const auto receive_into = [&](char* to) {
      at::Tensor into = bytes_at(to, their.bytes);
      calls.recv(into, peers_[i], tag + 1, what);
      received = true;
    };
    try {
      replicas_[i]->write_filled(
          their.step,
          std::string(their.save_id, static_cast<std::size_t>(
                                         std::clamp<int64_t>(their.save_id_size, 0, kSaveIdBytes))),
          static_cast<uint64_t>(their.bytes), receive_into, static_cast<uint32_t>(their.crc32));
    } catch (const CheckpointError& e) {
      if (e.kind() == ErrorKind::kRankFailed) throw;
      logger().error("memory tier '{}': rank {} keeps no replica of {}: {}", job_, rank_, what,
                     e.what());
      if (!received) {
        std::vector<char> dropped(static_cast<std::size_t>(their.bytes));
        receive_into(dropped.data());
      }
    }
  }
  for (const auto& send : sends) calls.wait(send, "sending a memory step");
}

}  // namespace dcpp::detail
