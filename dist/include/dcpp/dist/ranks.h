#pragma once
// Ranks: the process group and coordinator rank that every options struct of saving and loading
// shares (SaveOptions, LoadOptions, AsyncCheckpointerOptions, CheckpointManagerOptions).

#include <dcpp/core/export.h>

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include <utility>

namespace dcpp {

/// The ranks that save or load together: every one calls with its own part of the state.
struct DCPP_API Ranks {
  /// null: this process alone. Plans and results travel over it as CPU tensors, so it must be a
  /// group that runs CPU collectives (Gloo); use a group of its own for checkpoints, so they never
  /// interleave with training collectives. Its timeout bounds how long a dead rank can stall the
  /// others.
  c10::intrusive_ptr<c10d::ProcessGroup> process_group;
  /// The rank that builds the global plan and writes `.metadata`.
  int coordinator_rank = 0;

  Ranks& with_process_group(c10::intrusive_ptr<c10d::ProcessGroup> value) {
    process_group = std::move(value);
    return *this;
  }
  Ranks& with_coordinator_rank(int value) {
    coordinator_rank = value;
    return *this;
  }
};

}  // namespace dcpp
