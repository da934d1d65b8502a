#pragma once
// The few collectives a checkpoint needs, on bytes: over a c10d process group, or trivially for
// one process. Every message counts in checkpoint_traffic().

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace dcpp::detail {

/// Collective exchange of byte strings between the ranks of a job. Every rank must make the same
/// calls in the same order. Blocking; a collective that does not complete within the process
/// group's timeout (a dead rank) throws a CheckpointError (kRankFailed) that names, once the ranks
/// have exchanged their process identities (the first call does), the ranks that have exited.
/// Not thread-safe.
class Collectives {
 public:
  virtual ~Collectives() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// Every rank's `bytes`, indexed by rank, on every rank; each message padded to the longest.
  /// Receives (size - 1) x the longest message: for short messages only.
  virtual std::vector<std::string> all_gather(const std::string& bytes) = 0;
  /// `root`'s `bytes` on every rank (the argument is ignored elsewhere).
  virtual std::string broadcast(const std::string& bytes, int root) = 0;
  /// Every rank's `bytes`, indexed by rank, on `root`; an empty vector elsewhere. Each rank sends
  /// its own message to `root` alone, unpadded.
  virtual std::vector<std::string> gather(const std::string& bytes, int root) = 0;
  /// `per_rank[r]` (on `root`, one per rank; ignored elsewhere) to each rank r: each rank receives
  /// its own message alone.
  virtual std::string scatter(const std::vector<std::string>& per_rank, int root) = 0;
  /// The element-wise maximum of `values` (the same length on every rank) over the ranks.
  virtual std::vector<int64_t> max_over_ranks(std::vector<int64_t> values) = 0;
  /// Point to point: `bytes` to `peer`, which must call receive(this rank) for it. Messages
  /// between two ranks arrive in the order they were sent; a send may block until its receive.
  virtual void send(const std::string& bytes, int peer) = 0;
  /// The next message `peer` sent to this rank.
  virtual std::string receive(int peer) = 0;
};

/// One process: rank 0 of 1 (with no peer to send to: send and receive throw kUsage).
std::unique_ptr<Collectives> make_single_process_collectives();

/// Over `group` (on its message device: the CPU for a Gloo group). The first call of any kind
/// also all-gathers every rank's process identity (tens of bytes a rank), with which a failed
/// collective names the rank that died.
std::unique_ptr<Collectives> make_process_group_collectives(
    c10::intrusive_ptr<c10d::ProcessGroup> group);

}  // namespace dcpp::detail
