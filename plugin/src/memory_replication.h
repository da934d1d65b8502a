#pragma once
// The memory tier's replicas (MemoryTierOptions::replicas): each rank's memory steps, kept also by
// the other ranks of its clique, on other hosts, in two slots per peer
// (MemorySlots(job, peer, ..., holder = this rank)), so that a job whose host is lost resumes from
// its peers' copies.
//
// Rounds: every memory save of a rank is one round of its clique, run on a background thread
// over the replication group: each member sends the others a header (the step, its size, its
// CRC-32 and save identity), then the step's bytes, and receives theirs into its replica slots
// (the bytes go from the sender's slot to the receiver's, with no copy in between). A failed save
// is a round without a step, so that the members' rounds stay paired. Rounds run in order, one
// at a time; a memory write waits (wait_for_room) while an older round than the newest is
// unfinished, because the slot it writes may still be being sent.
//
// A peer that dies fails the round (Gloo reports the closed connection; a peer that stops
// answering, after the group's timeout): replication then stops on this rank for the rest of the
// run, logged, and the memory steps stay on this host only. A replica that does not fit is
// received and dropped, logged; the rounds go on.

#include <dcpp/plugin/memory_tier.h>
#include <dcpp/storage/memory_slots.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace dcpp::detail {

class GroupCalls;

/// The ranks of `rank`'s clique, itself included, ascending: the rank with the same place on each
/// host of its block of 1 + `replicas` hosts, `ranks_per_host` ranks a host (hosts in order). A
/// block cut short by the end of the job is smaller.
std::vector<int> clique_of(int rank, int world, int ranks_per_host, int replicas);

/// The ranks a host holds in this job: `options.ranks_per_host`, else LOCAL_WORLD_SIZE, else 1.
int ranks_per_host(const MemoryTierOptions& options);

class MemoryReplication {
 public:
  /// Collective over `options.replication_group` (every rank of the job): checks that no clique
  /// has two ranks on one host (by the launcher's GROUP_RANK, where set), throwing CheckpointError
  /// (kUsage) on every rank naming them, then starts the background thread. `max_bytes`: the
  /// largest replica accepted.
  MemoryReplication(const MemoryTierOptions& options, std::string job, int rank, int world,
                    int64_t max_bytes);
  /// Runs the rounds queued (the peers wait for them), then stops.
  ~MemoryReplication();
  MemoryReplication(const MemoryReplication&) = delete;
  MemoryReplication& operator=(const MemoryReplication&) = delete;

  /// The other ranks of this rank's clique (none: no replicas, and rounds do nothing).
  const std::vector<int>& peers() const { return peers_; }

  /// Blocks until no round but the newest is unfinished.
  void wait_for_room();
  /// Queues the next round: `step`, just written into this rank's slot and valid until that slot
  /// is written again (the caller waits for room first), or none: the save failed.
  void submit(std::optional<MemoryStep> step);
  /// Blocks until every round queued has run.
  void drain();
  /// Removes the replica regions this rank keeps (after drain()).
  void release();

 private:
  void run();
  void round(const std::optional<MemoryStep>& step, int64_t number);

  std::string job_;
  int rank_;
  std::vector<int> peers_;
  std::unique_ptr<GroupCalls> calls_;
  std::vector<std::unique_ptr<MemorySlots>> replicas_;  // by peers_' order
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<std::optional<MemoryStep>> queue_;  // its front is the round running
  bool closing_ = false;
  std::atomic<bool> broken_{false};
  std::thread thread_;
};

}  // namespace dcpp::detail
