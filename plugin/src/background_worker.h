#pragma once
// One background thread running queued tasks in order: the manager's commits of async saves and
// its pruning, off the training thread.

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

namespace dcpp::detail {

/// Thread-safe. Tasks must not throw (an escaping exception is swallowed and logged).
class BackgroundWorker {
 public:
  BackgroundWorker();
  /// Runs the queued tasks to the end, then joins the thread.
  ~BackgroundWorker();
  BackgroundWorker(const BackgroundWorker&) = delete;
  BackgroundWorker& operator=(const BackgroundWorker&) = delete;

  void post(std::function<void()> task);
  /// Blocks until every task posted before this call has run.
  void drain();

 private:
  void run();

  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<std::function<void()>> tasks_;
  bool busy_ = false;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace dcpp::detail
