#pragma once
// The few collectives a checkpoint needs, on bytes: over a c10d process group, or trivially for
// one process.

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include <memory>
#include <string>
#include <vector>

namespace dcpp::detail {

/// Collective exchange of byte strings between the ranks of a job. Every rank must make the same
/// calls in the same order. Blocking; a collective that does not complete within the process
/// group's timeout (a dead rank) throws. Not thread-safe.
class Collectives {
 public:
  virtual ~Collectives() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// Every rank's `bytes`, indexed by rank, on every rank.
  virtual std::vector<std::string> all_gather(const std::string& bytes) = 0;
  /// `root`'s `bytes` on every rank (the argument is ignored elsewhere).
  virtual std::string broadcast(const std::string& bytes, int root) = 0;
};

/// One process: rank 0 of 1.
std::unique_ptr<Collectives> make_single_process_collectives();

/// Over `group` (CPU tensors, so a Gloo group): two collectives per exchange, one for the lengths
/// and one for the bytes.
std::unique_ptr<Collectives> make_process_group_collectives(
    c10::intrusive_ptr<c10d::ProcessGroup> group);

}  // namespace dcpp::detail
