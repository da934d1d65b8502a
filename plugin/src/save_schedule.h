#pragma once
// When a save is due (CheckpointManager::is_save_due): the step rule and the time rule of
// CheckpointManagerOptions. Local to the rank; the ranks agree on a time-due save elsewhere
// (CheckpointCallback follows the coordinator's clock).

#include <dcpp/plugin/checkpoint_manager.h>

#include <chrono>
#include <cstdint>

namespace dcpp::detail {

/// The step rule alone: whether save_every_steps is set and `step` is a multiple of it. The same
/// on every rank, so ranks need not agree on it.
bool is_step_due(const CheckpointManagerOptions& options, int64_t step);

/// Not thread-safe: the training thread alone asks and restarts. Reads its rules and its clock
/// from `options`, which must outlive it (the manager owns both).
class SaveSchedule {
 public:
  using Clock = std::chrono::steady_clock;

  /// The time rule counts from the first restart(); call it before the first is_due().
  explicit SaveSchedule(const CheckpointManagerOptions& options) : options_(options) {}

  /// Whether is_step_due(options, step), or save_every_seconds (when set) passed on the clock since
  /// the last restart(). Calls the clock only for the time rule.
  bool is_due(int64_t step) const;

  /// A save starts now: the time rule counts from here. Calls the clock once.
  void restart();

 private:
  // options.clock when given, else steady_clock::now.
  Clock::time_point now() const;

  const CheckpointManagerOptions& options_;
  Clock::time_point last_save_{};
};

}  // namespace dcpp::detail
