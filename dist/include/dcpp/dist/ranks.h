#pragma once
// Ranks: which ranks save or load together, said once for every options struct of saving and
// loading (SaveOptions, LoadOptions, AsyncCheckpointerOptions, CheckpointManagerOptions): a
// process group, or the store, rank and world size to make one from; and the coordinator.

#include <dcpp/core/export.h>

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <utility>

namespace dcpp {

/// The ranks that save or load together: every one calls with its own part of the state.
///
/// Give them as a process group, or as a store with this process's rank and the world size, from
/// which the AsyncCheckpointer and the CheckpointManager make their own Gloo groups (collective:
/// every rank makes its own); save and load need the group itself. Neither: this process alone.
/// A group wins over a store.
struct DCPP_API Ranks {
  /// Plans and results travel over it as CPU tensors, so it must be a group that runs CPU
  /// collectives (Gloo); use a group of its own for checkpoints, so they never interleave with
  /// training collectives. Its timeout bounds how long a dead rank can stall the others.
  c10::intrusive_ptr<c10d::ProcessGroup> process_group;
  /// The rank that builds the global plan and writes `.metadata`.
  int coordinator_rank = 0;
  /// The job's store (make_tcp_store), to make the groups from.
  c10::intrusive_ptr<c10d::Store> store;
  /// This process's rank: with `store`, its rank in the groups made (required); with a process
  /// group, -1 (the default) or the group's rank; alone, -1 is rank 0, but a save without
  /// collectives (SaveOptions::use_collectives) must be told the rank it names its files by.
  int rank = -1;
  /// The number of ranks the groups made from `store` have.
  int world_size = 1;

  Ranks& with_process_group(c10::intrusive_ptr<c10d::ProcessGroup> value) {
    process_group = std::move(value);
    return *this;
  }
  Ranks& with_coordinator_rank(int value) {
    coordinator_rank = value;
    return *this;
  }
  Ranks& with_store(c10::intrusive_ptr<c10d::Store> value, int rank_, int world_size_) {
    store = std::move(value);
    rank = rank_;
    world_size = world_size_;
    return *this;
  }
  Ranks& with_rank(int value) {
    rank = value;
    return *this;
  }
};

}  // namespace dcpp
