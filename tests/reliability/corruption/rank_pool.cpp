#include "rank_pool.h"

#include <dcpp/dist/process_group.h>

#include <torch/csrc/distributed/c10d/HashStore.hpp>

#include <chrono>
#include <stdexcept>

namespace dcpp::corruption {

RankPool::RankPool(int ranks, const std::string& group_name)
    : ranks_(ranks),
      store_(c10::make_intrusive<c10d::HashStore>()),
      errors_(static_cast<std::size_t>(ranks)) {
  // Generation 1 is the rendezvous: every rank makes its group at once.
  std::unique_lock<std::mutex> lock(mutex_);
  generation_ = 1;
  running_ = ranks;
  for (int rank = 0; rank < ranks; ++rank) {
    threads_.emplace_back([this, rank, group_name] { serve(rank, group_name); });
  }
  changed_.wait(lock, [&] { return running_ == 0; });
  for (const auto& error : errors_) {
    if (error) {
      lock.unlock();
      stop();
      std::rethrow_exception(error);
    }
  }
}

RankPool::~RankPool() { stop(); }

void RankPool::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_) return;
    stopping_ = true;
    ++generation_;
  }
  changed_.notify_all();
  for (auto& thread : threads_) {
    thread.join();
  }
}

std::vector<std::exception_ptr> RankPool::run(const Job& job) {
  std::unique_lock<std::mutex> lock(mutex_);
  job_ = &job;
  running_ = ranks_;
  for (auto& error : errors_) error = nullptr;
  ++generation_;
  changed_.notify_all();
  changed_.wait(lock, [&] { return running_ == 0; });
  job_ = nullptr;
  return errors_;
}

void RankPool::serve(int rank, const std::string& group_name) {
  c10::intrusive_ptr<c10d::ProcessGroup> group;
  std::exception_ptr error;
  try {
    group = make_gloo_process_group(store_, rank, ranks_,
                                    ProcessGroupOptions()
                                        .with_group_name(group_name)
                                        .with_gloo_hostname("127.0.0.1")
                                        .with_timeout(std::chrono::seconds(120)));
  } catch (...) {
    error = std::current_exception();
  }
  uint64_t seen = 1;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    errors_[static_cast<std::size_t>(rank)] = error;
    --running_;
  }
  changed_.notify_all();
  for (;;) {
    const Job* job = nullptr;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      changed_.wait(lock, [&] { return generation_ != seen; });
      seen = generation_;
      if (stopping_) return;
      job = job_;
    }
    std::exception_ptr failure;
    try {
      if (!group) throw std::runtime_error("rank " + std::to_string(rank) + " has no group");
      (*job)(rank, group);
    } catch (...) {
      failure = std::current_exception();
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      errors_[static_cast<std::size_t>(rank)] = failure;
      --running_;
    }
    changed_.notify_all();
  }
}

}  // namespace dcpp::corruption
