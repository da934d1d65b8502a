#pragma once
// CheckpointCallback: the TrainingCallback that drives a CheckpointManager — resume at train
// begin, periodic and preemption saves at step ends, a final save (and export) at train end.

#include <dcpp/core/export.h>
#include <dcpp/plugin/checkpoint_manager.h>
#include <dcpp/plugin/training_callback.h>

#include <c10/core/ScalarType.h>

#include <csignal>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace dcpp {

struct DCPP_API CheckpointCallbackOptions {
  /// On train begin, restore from `resume` (default: the latest complete checkpoint; nothing
  /// there: start fresh). Off: never resume.
  bool resume_enabled = true;
  RestoreRequest resume;

  /// Signals that mean "save and stop" (the handler only sets a flag). Empty: no handler.
  std::vector<int> preemption_signals{SIGTERM, SIGUSR1};
  /// Agree on saving every this many steps (an all-reduce of {preempted, time-due} flags over the
  /// manager's group; one process: no collective). 1: a signal is honoured at the next step end.
  int64_t agree_every_steps = 1;

  /// At train end, save a full checkpoint of the last step (unless there is one already).
  bool save_at_end = true;
  /// At train end, also export `export_key` of the context's state (e.g. "model"), cast to
  /// `export_dtype` when given (at::kBFloat16, at::kHalf), as `export-step-<step>/`.
  bool export_at_end = false;
  std::string export_key = "model";
  std::optional<at::ScalarType> export_dtype;
};

/// Not thread-safe: the training thread calls its hooks. Hooks that save or load are collective
/// over the manager's group (every rank calls them at the same steps, which the loop ensures by
/// running the same steps everywhere). Throws CheckpointError when a save or load fails.
class DCPP_API CheckpointCallback : public TrainingCallback {
 public:
  /// Installs the preemption handler for options.preemption_signals.
  explicit CheckpointCallback(std::shared_ptr<CheckpointManager> manager,
                              CheckpointCallbackOptions options = {});
  ~CheckpointCallback() override;

  /// Restores the context's state, step, epoch and content from the checkpoint to resume from.
  void on_train_begin(TrainingContext& context) override;
  /// Saves when due (every N steps / T seconds) or preempted (then requests the loop to stop);
  /// waits for staging before returning, so the next optimizer step may change the tensors.
  void on_step_end(TrainingContext& context) override;
  /// The final save and export; waits for every upload and pruning to finish.
  void on_train_end(TrainingContext& context) override;
  /// Waits for the save in flight (so a committed checkpoint is not lost); starts none.
  void on_exception(TrainingContext& context, std::exception_ptr error) override;

  /// The checkpoint resumed from at train begin, if any.
  const std::optional<CheckpointInfo>& resumed_from() const { return resumed_from_; }
  /// Whether the last step end saved because of preemption.
  bool preempted() const { return preempted_; }
  CheckpointManager& manager() { return *manager_; }

 private:
  void save(TrainingContext& context);

  std::shared_ptr<CheckpointManager> manager_;
  CheckpointCallbackOptions options_;
  std::optional<CheckpointInfo> resumed_from_;
  bool preempted_ = false;
  int64_t last_saved_step_ = -1;
};

}  // namespace dcpp
