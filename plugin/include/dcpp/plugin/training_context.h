#pragma once
// TrainingContext: what a training loop shares with its callbacks — where it is (step, epoch),
// how it goes (metrics) and what makes up its state (the Stateful things to checkpoint).

#include <dcpp/core/export.h>
#include <dcpp/plugin/checkpoint_info.h>
#include <dcpp/state_dict/state_dict.h>
#include <dcpp/state_dict/stateful.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <string>

namespace dcpp {

/// Owned by the training loop; callbacks read and change it from the training thread only
/// (not thread-safe, except request_stop() and should_stop()).
class DCPP_API TrainingContext {
 public:
  /// Optimizer steps completed so far (the loop increments it before on_step_end). A callback that
  /// resumes sets it to the restored step.
  int64_t step = 0;
  /// The current epoch (the loop's own meaning; restored with the step).
  int64_t epoch = 0;
  /// The latest metrics ("loss", ...): recorded with each checkpoint, used by keep-best retention.
  std::map<std::string, double> metrics;
  /// Stored with every checkpoint, readable without loading tensors (read_checkpoint_info).
  ContentMetadata content;
  /// What is checkpointed: "model", "optim", "lr_scheduler", "data_loader", "rng", user objects —
  /// Stateful objects (their state_dict() is saved, load_state_dict() restores them), tensors,
  /// values or nested dicts, under names of your choice.
  StateDict state;

  /// Adds (or replaces) one thing to checkpoint.
  TrainingContext& add(const std::string& name, StateValue value) {
    state.insert_or_assign(name, std::move(value));
    return *this;
  }

  /// Asks the loop to stop after the current step (e.g. preempted). Thread-safe.
  void request_stop() { stop_.store(true); }
  /// What the loop checks at each step boundary. Thread-safe.
  bool should_stop() const { return stop_.load(); }

 private:
  std::atomic<bool> stop_{false};
};

}  // namespace dcpp
