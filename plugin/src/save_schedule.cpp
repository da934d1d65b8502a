// The step and time rules of CheckpointManagerOptions (save_schedule.h).

#include "save_schedule.h"

namespace dcpp::detail {

bool is_step_due(const CheckpointManagerOptions& options, int64_t step) {
  return options.save_every_steps > 0 && step % options.save_every_steps == 0;
}

bool SaveSchedule::is_due(int64_t step) const {
  if (is_step_due(options_, step)) return true;
  if (options_.save_every_seconds <= 0) return false;
  return std::chrono::duration<double>(now() - last_save_).count() >= options_.save_every_seconds;
}

void SaveSchedule::restart() { last_save_ = now(); }

SaveSchedule::Clock::time_point SaveSchedule::now() const {
  return options_.clock ? options_.clock() : Clock::now();
}

}  // namespace dcpp::detail
