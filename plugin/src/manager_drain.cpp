// What the CheckpointManager does after each commit on a root's leader: prune the root, or, with
// a remote tier, post a drain pass (remote_tier.h) to the drainer, whose errors wait_for_remote()
// reports. With a node-local root the coordinator looks again, after a growing pause, for the
// other hosts' files of the steps it could not commit yet, and wait_for_remote() is collective:
// the hosts' passes and the coordinator's take turns until every step committed so far is up.
// Here too: the waits the public class forwards (wait, wait_for_remote, close).

#include "checkpoint_manager_impl.h"
#include "core/exception_message.h"
#include "core/logging.h"
#include "rank_agreement.h"

#include <dcpp/core/checkpoint_error.h>

#include <algorithm>
#include <optional>

namespace dcpp {

namespace {

// The pauses before the coordinator looks again for other hosts' files: 0.5 s, doubling to 30 s.
constexpr std::chrono::milliseconds kFirstHostRecheck{500};
constexpr std::chrono::milliseconds kLongestHostRecheck{30000};

}  // namespace

void CheckpointManager::Impl::after_commit() {
  if (!remote) {
    detail::prune_checkpoints(list_checkpoints(options.root), options.retention,
                              options.file_system.sync_files, *log);
    return;
  }
  drainer.post([this] { drain_remote(false); });
}

void CheckpointManager::Impl::drain_remote(bool retry_failed_now, bool starting) {
  try {
    // The passes a restart or the manager's end waits for read the lease and the listing within
    // the restart timeout (of the pass's start, or of the end's): a store that hangs must not
    // hold a job's start or exit for minutes. Uploads are not cut short.
    std::optional<detail::SteadyClock::duration> listing_bound;
    const int64_t closing = closing_since.load();
    if (options.remote.restart_timeout.count() > 0 && (starting || closing != 0)) {
      listing_bound = options.remote.restart_timeout;
      if (!starting) {
        const auto since = detail::SteadyClock::time_point(detail::SteadyClock::duration(closing));
        *listing_bound -= detail::SteadyClock::now() - since;
      }
    }
    remote->drain(options.root, options.retention, options.file_system.sync_files, retry_failed_now,
                  listing_bound);
  } catch (...) {
    detail::logger().error(
        "draining '{}' to {} failed (the steps stay local; the next commit "
        "tries again): {}",
        options.root.string(), remote->options().url,
        detail::exception_message(std::current_exception()));
    const std::lock_guard<std::mutex> lock(drain_error_mutex);
    if (!drain_error) drain_error = std::current_exception();
  }
  if (!host_recheck) return;
  if (remote->waiting_for_hosts()) {
    host_recheck->schedule(std::min(kFirstHostRecheck * (int64_t{1} << std::min(host_rechecks, 6)),
                                    kLongestHostRecheck));
    ++host_rechecks;
  } else {
    host_rechecks = 0;
  }
}

void CheckpointManager::Impl::drain_to_remote(bool retry_failed_now, bool collective) {
  if (collective && options.node_local_root && remote && world > 1) {
    settle_hosts(retry_failed_now);
    return;
  }
  wait_until_idle();
  if (retry_failed_now && remote && is_coordinator()) {
    // The passes before this retry failed on steps it tries again: its outcome is the answer
    // (their errors were logged when they happened).
    drainer.wait_until_idle();
    {
      const std::lock_guard<std::mutex> lock(drain_error_mutex);
      drain_error = nullptr;
    }
    drainer.post([this] { drain_remote(true); });
  }
  drainer.wait_until_idle();
  std::exception_ptr error;
  {
    const std::lock_guard<std::mutex> lock(drain_error_mutex);
    std::swap(error, drain_error);
  }
  if (error) std::rethrow_exception(error);
}

void CheckpointManager::Impl::wait() {
  wait_until_idle();
  if (std::exception_ptr error = history.take_first_error()) std::rethrow_exception(error);
}

void CheckpointManager::Impl::wait_for_remote() {
  drain_to_remote(true);
  if (std::exception_ptr error = history.take_first_error()) std::rethrow_exception(error);
}

void CheckpointManager::Impl::close() noexcept {
  if (host_recheck) host_recheck->close();
  closing_since = detail::SteadyClock::now().time_since_epoch().count();
  try {
    drain_to_remote(false, false);  // never collective: ranks may end apart
  } catch (...) {                   // logged when it happened
  }
}

std::vector<CheckpointInfo> CheckpointManager::Impl::list_remote() const {
  if (!remote) return {};
  return remote->list();
}

void CheckpointManager::Impl::settle_hosts(bool retry_failed_now) {
  wait_until_idle();
  drainer.wait_until_idle();  // this host's passes, posted by its commits
  const auto pass_on = [&](bool here, bool retry) {
    if (here) {
      drainer.post([this, retry] { drain_remote(retry); });
      drainer.wait_until_idle();
    }
    detail::every_rank_ok(group, true);  // every rank waits for that turn
  };
  detail::every_rank_ok(group, true);
  // The coordinator first: it replaces the remote steps of older saves, which the hosts' copies
  // wait for; then every other host copies its files; then the coordinator commits.
  pass_on(is_coordinator(), retry_failed_now);
  pass_on(is_root_leader() && !is_coordinator(), retry_failed_now);
  pass_on(is_coordinator(), false);
  std::string error;
  {
    const std::lock_guard<std::mutex> lock(drain_error_mutex);
    if (drain_error) error = detail::exception_message(drain_error);
    drain_error = nullptr;
  }
  error = detail::failures_of_ranks(group, rank, error);
  if (!error.empty()) {
    throw CheckpointError(ErrorKind::kIo, "draining the node-local roots '" +
                                              options.root.string() + "' to " + options.remote.url +
                                              " failed (" + error + ")");
  }
}

}  // namespace dcpp
