#include "background_crc.h"

#include "format/crc32.h"

namespace dcpp::detail {

BackgroundCrc::BackgroundCrc() : thread_([this] { run(); }) {}

BackgroundCrc::~BackgroundCrc() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    closing_ = true;
    pending_.clear();
  }
  changed_.notify_all();
  thread_.join();
}

void BackgroundCrc::add(const void* data, std::size_t size) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    pending_.emplace_back(data, size);
  }
  changed_.notify_all();
}

uint32_t BackgroundCrc::finish() {
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [this] { return pending_.empty() && idle_; });
  return crc_;
}

void BackgroundCrc::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    changed_.wait(lock, [this] { return closing_ || !pending_.empty(); });
    if (closing_) {
      return;
    }
    const auto [data, size] = pending_.front();
    pending_.pop_front();
    idle_ = false;
    uint32_t crc = crc_;
    lock.unlock();
    crc = crc32(crc, data, size);
    lock.lock();
    crc_ = crc;
    idle_ = true;
    changed_.notify_all();
  }
}

}  // namespace dcpp::detail
