#include "options_check.h"

#include <dcpp/core/checkpoint_error.h>

#include <cmath>
#include <sstream>
#include <string>

namespace dcpp::detail {
namespace {

// The one place the plugin's option errors are worded: `field` is the path below the struct.
template <typename Value>
[[noreturn]] void refuse(const char* options, const std::string& field, const Value& value,
                         const std::string& what_to_give) {
  std::ostringstream message;
  message << options << "::" << field << " is " << value << ": " << what_to_give;
  throw CheckpointError(ErrorKind::kUsage, message.str());
}

void check_retention(const RetentionPolicy& policy, const std::string& field) {
  constexpr const char* kOptions = "CheckpointManagerOptions";
  if (policy.keep_latest < 0) {
    refuse(kOptions, field + ".keep_latest", policy.keep_latest,
           "give how many of the latest checkpoints to keep, or 0 for no such rule");
  }
  if (policy.keep_every_steps < 0) {
    refuse(kOptions, field + ".keep_every_steps", policy.keep_every_steps,
           "give the step period of the checkpoints kept forever, or 0 for no such rule");
  }
  if (policy.keep_best < 0) {
    refuse(kOptions, field + ".keep_best", policy.keep_best,
           "give how many of the best checkpoints to keep, or 0 for no such rule");
  }
  if (policy.keep_best > 0 && policy.best_metric.empty()) {
    refuse(kOptions, field + ".best_metric", "empty",
           "give the metric (SaveRequest::metrics) that keep_best ranks checkpoints by");
  }
}

}  // namespace

void check_manager_options(const CheckpointManagerOptions& options) {
  constexpr const char* kOptions = "CheckpointManagerOptions";
  if (options.save_every_steps < 0) {
    refuse(kOptions, "save_every_steps", options.save_every_steps,
           "give the step period of periodic saves, or 0 for none");
  }
  if (!(options.save_every_seconds >= 0) || std::isinf(options.save_every_seconds)) {
    refuse(kOptions, "save_every_seconds", options.save_every_seconds,
           "give the seconds between timed saves, or 0 for none");
  }
  check_retention(options.retention, "retention");
  if (options.step_names == StepNames::kMegatronLM && options.node_local_root) {
    refuse(kOptions, "step_names", "StepNames::kMegatronLM",
           "Megatron-LM's step names are for a root every rank sees, not a node-local root: "
           "Megatron-Core's load reads every rank's files from one directory, which a node-local "
           "root spreads over the hosts; keep StepNames::kDcpp there (a step its remote tier "
           "holds converts with `dcpp convert --to megatron`)");
  }
  if (!options.remote.enabled()) return;
  check_retention(options.remote.retention, "remote.retention");
  if (options.remote.files_at_once < 1) {
    refuse(kOptions, "remote.files_at_once", options.remote.files_at_once,
           "give how many files one rank uploads at once, at least 1");
  }
  if (options.remote.drain_lease.count() < 0) {
    refuse(kOptions, "remote.drain_lease",
           std::to_string(options.remote.drain_lease.count()) + " s",
           "give the lease's length in seconds, or 0 for no lease");
  }
  if (options.remote.restart_timeout.count() < 0) {
    refuse(kOptions, "remote.restart_timeout",
           std::to_string(options.remote.restart_timeout.count()) + " s",
           "give how long a restart may wait for the store in seconds, or 0 for no bound");
  }
}

void check_callback_options(const CheckpointCallbackOptions& options) {
  constexpr const char* kOptions = "CheckpointCallbackOptions";
  if (options.agree_every_steps < 1) {
    refuse(kOptions, "agree_every_steps", options.agree_every_steps,
           "give how many steps apart the ranks agree on saving, 1 for every step");
  }
  if (options.max_consecutive_failed_saves < 0) {
    refuse(kOptions, "max_consecutive_failed_saves", options.max_consecutive_failed_saves,
           "give how many failed saves in a row end training, or 0 for never");
  }
}

}  // namespace dcpp::detail
