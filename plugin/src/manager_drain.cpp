// What the CheckpointManager does after each commit on the coordinator: prune the root, or, with
// a remote tier, post a drain pass (remote_tier.h) to the drainer, whose errors wait_for_remote()
// reports.

#include "checkpoint_manager_impl.h"
#include "core/exception_message.h"
#include "core/logging.h"

namespace dcpp {

void CheckpointManager::Impl::after_commit() {
  if (!remote) {
    detail::prune_checkpoints(options.root, options.retention, options.file_system.sync_files,
                              *log);
    return;
  }
  drainer.post([this] { drain_remote(false); });
}

void CheckpointManager::Impl::drain_remote(bool retry_failed_now) {
  try {
    remote->drain(options.root, options.retention, options.file_system.sync_files,
                  retry_failed_now);
  } catch (...) {
    detail::logger().error(
        "draining '{}' to {} failed (the steps stay local; the next commit "
        "tries again): {}",
        options.root.string(), remote->options().url,
        detail::exception_message(std::current_exception()));
    const std::lock_guard<std::mutex> lock(drain_error_mutex);
    if (!drain_error) drain_error = std::current_exception();
  }
}

void CheckpointManager::Impl::drain_to_remote(bool retry_failed_now) {
  drain();
  if (retry_failed_now && remote && is_coordinator()) {
    drainer.post([this] { drain_remote(true); });
  }
  drainer.drain();
  std::exception_ptr error;
  {
    const std::lock_guard<std::mutex> lock(drain_error_mutex);
    std::swap(error, drain_error);
  }
  if (error) std::rethrow_exception(error);
}

}  // namespace dcpp
