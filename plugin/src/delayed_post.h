#pragma once
// A task run once, a while from now, on a thread of its own: the coordinator's drain passes that
// look again for other hosts' files (a node-local root) are posted this way, so that no queued
// task sleeps and a drain of the drainer never waits for the timer.

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>

namespace dcpp::detail {

/// Thread-safe.
class DelayedPost {
 public:
  /// Starts the thread; `task` (which must not throw) runs on it when a schedule comes due.
  explicit DelayedPost(std::function<void()> task);
  /// close().
  ~DelayedPost();
  DelayedPost(const DelayedPost&) = delete;
  DelayedPost& operator=(const DelayedPost&) = delete;

  /// Runs the task once, `delay` from now (replacing a schedule not yet due); no-op once closed.
  void schedule(std::chrono::milliseconds delay);
  /// Drops the schedule not yet due.
  void cancel();
  /// Drops the schedule and joins the thread (a task running finishes first); for good.
  void close();

 private:
  void run();

  std::function<void()> task_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::optional<std::chrono::steady_clock::time_point> due_;
  bool closed_ = false;
  std::thread thread_;  // last: started once everything above is constructed
};

}  // namespace dcpp::detail
