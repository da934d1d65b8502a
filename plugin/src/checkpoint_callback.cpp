// CheckpointCallback: resume at train begin; at each step end the ranks agree (one all-reduce of
// {preempted, time-due}) whether to save, so every rank saves the same step; preemption then asks
// the loop to stop. The signal handler only sets a flag (preemption.cpp).

#include <dcpp/plugin/checkpoint_callback.h>

#include "core/logging.h"
#include "memory_tier.h"
#include "options_check.h"
#include "rank_agreement.h"
#include "save_schedule.h"

#include <dcpp/core/checkpoint_error.h>
#include <dcpp/plugin/preemption.h>

#include <algorithm>

namespace dcpp {

namespace {

// The failed saves at the end of a manager's history, the latest last.
struct FailedSaves {
  int count = 0;
  std::vector<int64_t> steps;
  std::string last_error;
};

FailedSaves failed_saves_in_a_row(const std::vector<SaveRecord>& history) {
  FailedSaves failed;
  for (auto it = history.rbegin(); it != history.rend() && !it->ok; ++it) {
    if (failed.count == 0) failed.last_error = it->error;
    ++failed.count;
    failed.steps.insert(failed.steps.begin(), it->step);
  }
  return failed;
}

// On every rank, once the ranks agreed that one of them saw too many failures.
[[noreturn]] void throw_too_many_failed_saves(const FailedSaves& failed) {
  std::string steps;
  for (int64_t step : failed.steps) steps += (steps.empty() ? "" : ", ") + std::to_string(step);
  // The saves' own errors, with their kinds, were reported by the manager as they failed; this one
  // stops the loop: the checkpoints are not being written (kIo), or another rank's are not.
  throw CheckpointError(
      failed.count == 0 ? ErrorKind::kRankFailed : ErrorKind::kIo,
      failed.count == 0
          ? "another rank's checkpoint saves failed too often in a row (see its error); "
            "stopping the training loop rather than going on without checkpoints"
          : std::to_string(failed.count) + " checkpoint saves in a row failed (steps " + steps +
                "), the last with: " + failed.last_error +
                "; stopping the training loop rather than going on without checkpoints. Fix the "
                "cause and resume, or raise "
                "CheckpointCallbackOptions::max_consecutive_failed_saves "
                "(0: only log failures)");
}

SaveRequest request_of(const TrainingContext& context) {
  SaveRequest request;
  request.step = context.step;
  request.epoch = context.epoch;
  request.metrics = context.metrics;
  request.content = context.content;
  return request;
}

}  // namespace

CheckpointCallback::CheckpointCallback(std::shared_ptr<CheckpointManager> manager,
                                       CheckpointCallbackOptions options)
    : manager_(std::move(manager)), options_(std::move(options)) {
  if (!manager_)
    throw CheckpointError(ErrorKind::kUsage, "CheckpointCallback needs a CheckpointManager");
  detail::check_callback_options(options_);
  if (!options_.preemption_signals.empty()) {
    install_preemption_handler(options_.preemption_signals);
  }
}

CheckpointCallback::~CheckpointCallback() {
  if (!options_.preemption_signals.empty()) {
    uninstall_preemption_handler(options_.preemption_signals);
  }
}

void CheckpointCallback::on_train_begin(TrainingContext& context) {
  if (!options_.resume_enabled) return;
  const bool coordinator = manager_->rank() == manager_->options().ranks.coordinator_rank;
  const std::string root = manager_->options().root.string();
  resumed_from_ = manager_->restore(context.state, options_.resume);
  if (!resumed_from_) {
    if (options_.require_resume) {
      throw CheckpointError(
          ErrorKind::kNotFound,
          "no complete checkpoint under '" + root +
              "' to resume from, and CheckpointCallbackOptions::require_resume is "
              "set; check the root (a typo trains from step 0), or unset "
              "require_resume for the first run");
    }
    if (coordinator) detail::logger().info("no checkpoint under '{}', starting fresh", root);
    return;
  }
  context.step = resumed_from_->step;
  context.epoch = resumed_from_->epoch;
  for (const auto& [key, value] : resumed_from_->content) {
    context.content.emplace(key, value);  // the loop's own values win
  }
  // A step resumed from memory is on no disk yet: train end saves it when it is the last.
  if (!detail::is_memory_tier_path(resumed_from_->path)) last_saved_step_ = context.step;
  if (coordinator) {
    detail::logger().info("resumed from '{}' (step {})", resumed_from_->path.string(),
                          context.step);
  }
}

void CheckpointCallback::save(TrainingContext& context) {
  ManagedSave saving = manager_->save(context.state, request_of(context));
  last_saved_step_ = context.step;
  saving.staged.wait();  // the next optimizer step may change the tensors after this
}

void CheckpointCallback::on_before_optimizer_step(TrainingContext& /*context*/) {
  manager_->wait_for_memory_copy();
  optimizer_hook_seen_ = true;
  copy_in_flight_ = -1;
}

void CheckpointCallback::on_step_end(TrainingContext& context) {
  if (copy_in_flight_ >= 0) {
    // The optimizer step ran while the copy may have: that memory step cannot be trusted.
    const int64_t copied = copy_in_flight_;
    copy_in_flight_ = -1;
    manager_->release_memory();
    throw CheckpointError(
        ErrorKind::kUsage,
        "step " + std::to_string(context.step) +
            " ended without CheckpointCallback::on_before_optimizer_step, while memory step " +
            std::to_string(copied) +
            " was being copied (MemoryTierOptions::copy_while_training): the optimizer step may "
            "have changed the state during the copy, so the memory tier's regions were removed "
            "(the disk and remote tiers are untouched). Call on_before_optimizer_step(context) "
            "before every optimizer step, or unset copy_while_training");
  }
  bool preempt = false, due = detail::is_step_due(manager_->options(), context.step);
  const bool to_memory = manager_->is_memory_save_due(context.step);
  const bool copies_while_training = to_memory && manager_->options().memory.copy_while_training;
  // A memory copy while training overwrites this rank's older slot while the next step runs: the
  // ranks agree first, so that every rank's copy of the step before has ended (each waited for it
  // in on_before_optimizer_step) and the newest step they all hold stays whole.
  if (context.step % options_.agree_every_steps == 0 || copies_while_training) {
    // Time-based saves follow the coordinator's clock; a signal on any rank counts for all, and
    // so do too many failed saves (a commit fails on the coordinator only).
    const bool time_due = manager_->rank() == manager_->options().ranks.coordinator_rank &&
                          manager_->is_save_due(context.step);
    const FailedSaves failed = failed_saves_in_a_row(manager_->history(
        static_cast<std::size_t>(std::max(options_.max_consecutive_failed_saves, 1))));
    const bool too_many = options_.max_consecutive_failed_saves > 0 &&
                          failed.count >= options_.max_consecutive_failed_saves;
    const std::vector<int64_t> flags = detail::max_over_ranks(
        manager_->process_group(),
        {preemption_requested() ? 1 : 0, time_due ? 1 : 0, too_many ? 1 : 0});
    if (flags[2] != 0) throw_too_many_failed_saves(failed);
    preempt = flags[0] != 0;
    due = due || flags[1] != 0;
  }
  if (due || preempt) {
    save(context);
  } else if (to_memory) {
    manager_->save_to_memory(context.state, request_of(context));
  }
  if (copies_while_training) {
    if (optimizer_hook_seen_) {
      copy_in_flight_ = context.step;  // until on_before_optimizer_step
    } else {
      manager_->wait_for_memory_copy();  // a loop that never calls it stays safe
    }
  }
  if (preempt) {
    preempted_ = true;
    detail::logger().warn("preempted: saved step {}, stopping the training loop", context.step);
    context.request_stop();
  }
}

void CheckpointCallback::on_train_end(TrainingContext& context) {
  copy_in_flight_ = -1;  // no optimizer step follows; the manager's calls below wait for it
  if (options_.save_at_end && last_saved_step_ != context.step) save(context);
  if (options_.export_at_end) {
    const StateValue* value = context.state.find(options_.export_key);
    if (value == nullptr) {
      throw CheckpointError(ErrorKind::kUsage, "export_at_end: the training context has no '" +
                                                   options_.export_key +
                                                   "'; set CheckpointCallbackOptions::export_key");
    }
    StateDict exported;
    exported.insert(options_.export_key, *value);
    manager_->export_state(exported, request_of(context), options_.export_dtype);
  }
  manager_->wait();
  if (options_.save_at_end) manager_->release_memory();
}

void CheckpointCallback::on_exception(TrainingContext& context, std::exception_ptr error) {
  try {
    manager_->wait();
  } catch (const std::exception& e) {
    detail::logger().error("the save in flight failed too: {}", e.what());
  }
}

}  // namespace dcpp
