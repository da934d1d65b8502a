#include "delayed_post.h"

namespace dcpp::detail {

DelayedPost::DelayedPost(std::function<void()> task)
    : task_(std::move(task)), thread_([this] { run(); }) {}

DelayedPost::~DelayedPost() { close(); }

void DelayedPost::schedule(std::chrono::milliseconds delay) {
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    if (closed_) return;
    due_ = std::chrono::steady_clock::now() + delay;
  }
  changed_.notify_all();
}

void DelayedPost::cancel() {
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    due_.reset();
  }
  changed_.notify_all();
}

void DelayedPost::close() {
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    closed_ = true;
    due_.reset();
  }
  changed_.notify_all();
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
}

void DelayedPost::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!closed_) {
    if (!due_) {
      changed_.wait(lock);
      continue;
    }
    if (std::chrono::steady_clock::now() < *due_) {
      changed_.wait_until(lock, *due_);
      continue;
    }
    due_.reset();
    lock.unlock();
    task_();
    lock.lock();
  }
}

}  // namespace dcpp::detail
