#pragma once
// Ranks as threads of one process, kept for many collective jobs: each thread holds its rank's
// Gloo process group (loopback, one in-memory store) for its whole life, so a job costs no
// rendezvous.

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace dcpp::corruption {

class RankPool {
 public:
  using Job = std::function<void(int rank, const c10::intrusive_ptr<c10d::ProcessGroup>& group)>;

  /// Starts `ranks` threads and makes their group; throws the first rank's error if that fails.
  RankPool(int ranks, const std::string& group_name);
  /// Stops and joins the threads.
  ~RankPool();
  RankPool(const RankPool&) = delete;
  RankPool& operator=(const RankPool&) = delete;

  int size() const { return ranks_; }
  /// Runs `job` on every rank at once and waits for all; returns each rank's exception (null when
  /// it returned). Called from one thread at a time.
  std::vector<std::exception_ptr> run(const Job& job);

 private:
  void serve(int rank, const std::string& group_name);
  void stop();

  const int ranks_;
  c10::intrusive_ptr<c10d::Store> store_;
  std::mutex mutex_;
  std::condition_variable changed_;
  const Job* job_ = nullptr;
  uint64_t generation_ = 0;  // bumped for each job (and to stop)
  int running_ = 0;          // ranks still working on the current generation
  bool stopping_ = false;
  std::vector<std::exception_ptr> errors_;
  std::vector<std::thread> threads_;
};

}  // namespace dcpp::corruption
