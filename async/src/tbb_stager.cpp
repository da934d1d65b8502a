// The TBB-threaded stager. stage() prepares the job on the caller's thread (Stateful objects,
// buffers) and queues it; a driver thread owned by the stager takes jobs one at a time and runs
// their pieces with tbb::parallel_for inside a task arena of `concurrency` slots (the driver
// takes one, TBB workers the others), then completes the job's promise.
//
// Hand-offs ThreadSanitizer cannot see (Debian's TBB is not instrumented) are annotated: the
// driver releases the job before parallel_for, each body acquires it before copying and
// releases it after, and the driver acquires it once parallel_for returns. TBB's templates are
// instantiated only in core/src/tbb_parallel.cpp, compiled without instrumentation like libtbb
// itself. The promise is then completed from the driver, a SerialWorker's std::thread, through a
// mutex TSan sees.
//
// Priority: the driver lowers its own nice value when it starts; a task_scheduler_observer on
// the arena lowers each TBB worker's when it enters the arena.

#include <dcpp/async/tbb_stager.h>

#include "core/serial_worker.h"
#include "core/tbb_parallel.h"
#include "core/thread_priority.h"
#include "core/tsan_annotations.h"
#include "staging_job.h"

#include <dcpp/core/checkpoint_error.h>

#include <oneapi/tbb/task_arena.h>
#include <oneapi/tbb/task_scheduler_observer.h>

#include <algorithm>
#include <memory>
#include <mutex>

namespace dcpp {

namespace {

// Lowers the priority of every TBB worker that enters the arena.
class LowPriorityObserver final : public tbb::task_scheduler_observer {
 public:
  LowPriorityObserver(tbb::task_arena& arena, int nice)
      : tbb::task_scheduler_observer(arena), nice_(nice) {
    DCPP_HAPPENS_BEFORE(this);
    observe(true);
  }
  ~LowPriorityObserver() override {
    observe(false);  // waits for callbacks in progress (inside TBB, invisible to TSan)
    DCPP_HAPPENS_AFTER(this);
  }

  void on_scheduler_entry(bool is_worker) override {
    DCPP_HAPPENS_AFTER(this);
    if (is_worker) {
      detail::lower_current_thread_priority(nice_);
    }
    DCPP_HAPPENS_BEFORE(this);
  }

 private:
  const int nice_;
};

class TbbStager final : public AsyncStager {
 public:
  explicit TbbStager(TbbStagerOptions options)
      : options_(validated(options)),
        arena_(options_.concurrency, /*reserved_for_masters=*/1),
        driver_([nice = options_.nice] { detail::lower_current_thread_priority(nice); }) {
    arena_.initialize();
    if (options_.nice > 0) {
      observer_ = std::make_unique<LowPriorityObserver>(arena_, options_.nice);
    }
  }

  // driver_, the last member, goes first: it runs every queued job, so no promise is left
  // unfulfilled, before the arena and buffers go.
  ~TbbStager() override = default;

  Future<StateDict> stage(const StateDict& state_dict) override {
    Promise<StateDict> promise;
    Future<StateDict> future = promise.get_future();
    std::lock_guard<std::mutex> stage_lock(stage_mutex_);
    // Stages run one after the other: the previous one's copies (and its CUDA events, which this
    // prepare() records again) are done before this one takes the buffers.
    driver_.wait_until_idle();
    std::shared_ptr<detail::StagingJob> job;
    try {
      job = detail::StagingJob::prepare(state_dict, buffers_, options_.piece_bytes);
    } catch (...) {
      promise.set_exception(std::current_exception());
      return future;
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      staging_bytes_ = buffers_.bytes();
    }
    auto task = std::make_shared<Task>(Task{std::move(job), std::move(promise)});
    driver_.post([this, task] { run(*task); });
    return future;
  }

  void synchronize_staging() override { driver_.wait_until_idle(); }

  bool should_synchronize_after_execute() const override {
    return options_.synchronize_after_execute;
  }

  int64_t staging_bytes() const override {
    std::lock_guard<std::mutex> lock(mutex_);
    return staging_bytes_;
  }

 private:
  struct Task {
    std::shared_ptr<detail::StagingJob> job;
    Promise<StateDict> promise;
  };

  static TbbStagerOptions validated(TbbStagerOptions options) {
    if (options.concurrency < 1) {
      throw CheckpointError(ErrorKind::kUsage, "TbbStagerOptions::concurrency is " +
                                                   std::to_string(options.concurrency) +
                                                   "; it must be at least 1");
    }
    options.nice = std::clamp(options.nice, 0, 19);
    return options;
  }

  // Copies the pieces [begin, end) of a job; runs on TBB threads (through the uninstrumented
  // tbb_parallel.cpp), so it annotates what TBB's hand-offs guarantee.
  static void copy_pieces(void* context, std::size_t begin, std::size_t end) {
    auto& job = *static_cast<detail::StagingJob*>(context);
    DCPP_HAPPENS_AFTER(&job);
    for (std::size_t i = begin; i != end; ++i) {
      job.copy_piece(i);  // never throws
    }
    DCPP_HAPPENS_BEFORE(&job);
  }

  void run(Task& task) {
    try {
      detail::StagingJob& job = *task.job;
      DCPP_HAPPENS_BEFORE(&job);
      detail::parallel_for_in_arena(arena_, job.piece_count(), &TbbStager::copy_pieces, &job);
      DCPP_HAPPENS_AFTER(&job);
      job.finish();
      task.promise.set_value(job.staged());
    } catch (...) {
      task.promise.set_exception(std::current_exception());
    }
    task.job.reset();
  }

  const TbbStagerOptions options_;
  tbb::task_arena arena_;
  std::unique_ptr<LowPriorityObserver> observer_;

  std::mutex stage_mutex_;  // one prepare at a time; guards buffers_
  detail::StagingBuffers buffers_;

  mutable std::mutex mutex_;  // guards staging_bytes_
  int64_t staging_bytes_ = 0;
  detail::SerialWorker driver_;  // stages the jobs one at a time, in order
};

}  // namespace

std::unique_ptr<AsyncStager> make_tbb_stager(TbbStagerOptions options) {
  return std::make_unique<TbbStager>(options);
}

}  // namespace dcpp
