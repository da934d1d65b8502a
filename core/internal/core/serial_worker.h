#pragma once
// One background thread running posted tasks one at a time, in the order they were posted: the
// stager's driver, the async checkpointer's uploader, the manager's commits and pruning, the CRC of
// a stream of blocks.

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

namespace dcpp::detail {

/// Thread-safe. Tasks must not throw: one that does is logged and dropped, and the worker goes on.
/// Everything a task did happens before wait_until_idle() (or the destructor) returns.
class SerialWorker {
 public:
  /// Starts the thread; `on_start` runs on it first (e.g. lowering its priority).
  explicit SerialWorker(std::function<void()> on_start = {});
  /// Runs every task still queued, then joins the thread.
  ~SerialWorker();
  SerialWorker(const SerialWorker&) = delete;
  SerialWorker& operator=(const SerialWorker&) = delete;

  void post(std::function<void()> task);
  /// Blocks until every task posted before this call has run. Must not be called from a task.
  void wait_until_idle();
  /// Drops the tasks not yet started (the one running, if any, finishes).
  void discard_pending();

 private:
  void run(const std::function<void()>& on_start);

  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<std::function<void()>> tasks_;
  bool busy_ = false;
  bool stopping_ = false;
  std::thread thread_;  // last: started once everything above is constructed
};

}  // namespace dcpp::detail
