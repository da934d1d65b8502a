// The blocking stager: the staging job runs on the caller's thread inside stage().

#include <dcpp/async/blocking_stager.h>

#include "staging_job.h"

#include <mutex>

namespace dcpp {

namespace {

class BlockingStager final : public AsyncStager {
 public:
  explicit BlockingStager(BlockingStagerOptions options) : options_(options) {}

  Future<StateDict> stage(const StateDict& state_dict) override {
    Promise<StateDict> promise;
    try {
      std::lock_guard<std::mutex> lock(mutex_);
      std::shared_ptr<detail::StagingJob> job =
          detail::StagingJob::prepare(state_dict, buffers_, options_.piece_bytes);
      detail::run_job_inline(*job);
      promise.set_value(job->staged());
    } catch (...) {
      promise.set_exception(std::current_exception());
    }
    return promise.get_future();
  }

  void synchronize_staging() override {}  // stage() has finished before it returned
  bool should_synchronize_after_execute() const override { return false; }

  int64_t staging_bytes() const override {
    std::lock_guard<std::mutex> lock(mutex_);
    return buffers_.bytes();
  }

 private:
  const BlockingStagerOptions options_;
  mutable std::mutex mutex_;  // one stage at a time; guards buffers_
  detail::StagingBuffers buffers_;
};

}  // namespace

std::unique_ptr<AsyncStager> make_blocking_stager(BlockingStagerOptions options) {
  return std::make_unique<BlockingStager>(options);
}

}  // namespace dcpp
