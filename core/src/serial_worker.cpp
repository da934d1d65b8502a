#include "core/serial_worker.h"

#include "core/exception_message.h"
#include "core/logging.h"

namespace dcpp::detail {

SerialWorker::SerialWorker(std::function<void()> on_start)
    : thread_([this, on_start = std::move(on_start)] { run(on_start); }) {}

SerialWorker::~SerialWorker() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

void SerialWorker::post(std::function<void()> task) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    tasks_.push_back(std::move(task));
  }
  changed_.notify_all();
}

void SerialWorker::wait_until_idle() {
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [this] { return tasks_.empty() && !busy_; });
}

void SerialWorker::discard_pending() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    tasks_.clear();
  }
  changed_.notify_all();
}

void SerialWorker::run(const std::function<void()>& on_start) {
  if (on_start) {
    on_start();
  }
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    changed_.wait(lock, [this] { return stopping_ || !tasks_.empty(); });
    if (tasks_.empty()) {
      return;  // stopping, and nothing left
    }
    std::function<void()> task = std::move(tasks_.front());
    tasks_.pop_front();
    busy_ = true;
    lock.unlock();
    try {
      task();
    } catch (...) {
      logger().error("a background task failed: {}", exception_message(std::current_exception()));
    }
    task = nullptr;  // whatever the task holds is released before wait_until_idle() returns
    lock.lock();
    busy_ = false;
    changed_.notify_all();
  }
}

}  // namespace dcpp::detail
