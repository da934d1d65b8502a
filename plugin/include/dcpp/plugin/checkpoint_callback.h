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
#include <utility>
#include <vector>

namespace dcpp {

struct DCPP_API CheckpointCallbackOptions {
  /// On train begin, restore from `resume` (default: the latest complete checkpoint; nothing
  /// there: start fresh). Off: never resume. Either way the coordinator logs, at info level, which
  /// checkpoint it resumed from, or that there was none.
  bool resume_enabled = true;
  RestoreRequest resume;
  /// With resume_enabled: no complete checkpoint to resume from is an error (CheckpointError on
  /// every rank naming the root) instead of a fresh start: for a job that must continue, where a
  /// wrong or empty root would silently train from step 0.
  bool require_resume = false;

  /// Signals that mean "save and stop" (the handler only sets a flag). Empty: no handler. Add
  /// SIGINT to save on Ctrl-C too.
  std::vector<int> preemption_signals{SIGTERM, SIGUSR1};

  /// Async saves fail in the background: after this many failed in a row, the next on_step_end
  /// (one where the ranks agree, see agree_every_steps) throws a CheckpointError on every rank
  /// with the last failure, so training does not go on for hours without a checkpoint. A save
  /// that commits resets the count. 0: never (failures are only logged). A sync save that fails
  /// throws at once, whatever this says.
  int max_consecutive_failed_saves = 2;
  /// Agree on saving every this many steps (an all-reduce of {preempted, time-due, too many failed
  /// saves} flags over the manager's group; one process: no collective). 1: a signal is honoured at
  /// the next step end. At least 1 (less is refused when the callback is made).
  int64_t agree_every_steps = 1;

  /// At train end, save a full checkpoint of the last step (unless there is one already), and
  /// then, with a memory tier, remove this rank's memory regions (the step they hold is on disk).
  /// Between, each step end that the manager's memory tier keeps and that is no disk step is
  /// copied there (CheckpointManager::save_to_memory).
  bool save_at_end = true;
  /// At train end, also export `export_key` of the context's state (e.g. "model"), cast to
  /// `export_dtype` when given (at::kBFloat16, at::kHalf), as `export-step-<step>/`.
  bool export_at_end = false;
  std::string export_key = "model";
  std::optional<at::ScalarType> export_dtype;

  CheckpointCallbackOptions& with_resume_enabled(bool value) {
    resume_enabled = value;
    return *this;
  }
  CheckpointCallbackOptions& with_resume(RestoreRequest request) {
    resume = std::move(request);
    return *this;
  }
  CheckpointCallbackOptions& with_require_resume(bool value) {
    require_resume = value;
    return *this;
  }
  CheckpointCallbackOptions& with_preemption_signals(std::vector<int> signals) {
    preemption_signals = std::move(signals);
    return *this;
  }
  CheckpointCallbackOptions& with_max_consecutive_failed_saves(int n) {
    max_consecutive_failed_saves = n;
    return *this;
  }
  CheckpointCallbackOptions& with_agree_every_steps(int64_t n) {
    agree_every_steps = n;
    return *this;
  }
  CheckpointCallbackOptions& with_save_at_end(bool value) {
    save_at_end = value;
    return *this;
  }
  /// Turns export_at_end on for `key`, cast to `dtype` when given.
  CheckpointCallbackOptions& with_export_at_end(std::string key,
                                                std::optional<at::ScalarType> dtype = {}) {
    export_at_end = true;
    export_key = std::move(key);
    export_dtype = dtype;
    return *this;
  }
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

  /// Restores the context's state, step, epoch and content from the checkpoint to resume from;
  /// the coordinator logs which (or that there was none). Throws CheckpointError when the load
  /// fails, or when there is nothing to resume from and options.require_resume is set.
  void on_train_begin(TrainingContext& context) override;
  /// Waits for the memory step being copied while training went on
  /// (MemoryTierOptions::copy_while_training), so the optimizer step may change the tensors.
  /// A loop that uses copy_while_training calls it before every optimizer step; until it first
  /// does, the callback waits for each copy in on_step_end instead (so a loop that never calls it
  /// is safe), and once it did, a step that ends without it throws (below).
  void on_before_optimizer_step(TrainingContext& context) override;
  /// Saves when due (every N steps / T seconds) or preempted (then requests the loop to stop);
  /// waits for staging before returning, so the next optimizer step may change the tensors.
  /// Throws CheckpointError, on every rank, when a sync save failed or when
  /// options.max_consecutive_failed_saves saves failed in a row (async ones in the background);
  /// and (kUsage) when a loop that called on_before_optimizer_step stopped calling it while a
  /// memory step was copied in the background: that step may hold a changed state, so the memory
  /// tier's regions are removed first (the disk and remote tiers are untouched).
  void on_step_end(TrainingContext& context) override;
  /// The final save and export; waits for every upload and pruning to finish.
  void on_train_end(TrainingContext& context) override;
  /// Waits for the save in flight (so a committed checkpoint is not lost); starts none.
  void on_exception(TrainingContext& context, std::exception_ptr error) override;

  /// The checkpoint resumed from at train begin, if any.
  const std::optional<CheckpointInfo>& resumed_from() const { return resumed_from_; }
  /// Whether the last step end saved because of preemption. A preempted job should exit with
  /// kPreemptedExitCode, so that a scheduler does not take it for one that finished.
  bool preempted() const { return preempted_; }
  /// The exit status the examples give a preempted run: non-zero, and apart from the usual
  /// failure codes (1) and from 128 + a signal. Torchelastic and Slurm treat any non-zero exit as
  /// "requeue or restart".
  static constexpr int kPreemptedExitCode = 75;  // EX_TEMPFAIL: "try again later"
  CheckpointManager& manager() { return *manager_; }

 private:
  void save(TrainingContext& context);

  std::shared_ptr<CheckpointManager> manager_;
  CheckpointCallbackOptions options_;
  std::optional<CheckpointInfo> resumed_from_;
  bool preempted_ = false;
  int64_t last_saved_step_ = -1;
  // copy_while_training: whether the loop called on_before_optimizer_step yet, and the step
  // whose memory copy runs in the background until it is called again (-1: none).
  bool optimizer_hook_seen_ = false;
  int64_t copy_in_flight_ = -1;
};

}  // namespace dcpp
