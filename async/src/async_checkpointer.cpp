// AsyncCheckpointer: stage on the caller's side, upload on one background thread.
//
// Protocol of one save: async_save applies the in-flight policy, calls stager->stage(), and queues
// an upload job {staged future, writer, promise}; the uploader thread waits for the staged copy,
// runs dcpp::save on it (over the checkpointer's own process group), completes the promise, drops
// the staged copy, and only then marks the checkpointer idle. So when an async_save that waited
// (kWait) returns, the previous upload is complete and the staging buffers are free to reuse.
//
// With several ranks a failure on one rank before its save (making the writer, say a rank without
// S3 credentials, or staging) must not leave the others waiting in a collective: the failing rank
// still enters dcpp::save, with a writer that throws that error in the save's first step, so every
// rank fails that save at once, naming the rank.

#include <dcpp/async/async_checkpointer.h>
#include <dcpp/async/blocking_stager.h>
#include <dcpp/checkpoint/checkpointer.h>
#include <dcpp/storage/storage_location.h>

#include "core/exception_message.h"
#include "core/group_calls.h"
#include "core/logging.h"
#include "core/serial_worker.h"
#include "core/thread_priority.h"
#include "dist/legacy_ranks.h"
#include "dist/store_rank.h"
#include "storage/location_defaults.h"

#include <dcpp/core/checkpoint_error.h>

#include <c10/core/DeviceGuard.h>

#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>

namespace dcpp {

namespace {

// Fails the save in its first step with `error`, met on this rank before the save (making its
// writer, staging), so that every rank learns of it.
class FailedBeforeSaveWriter final : public StorageWriter {
 public:
  explicit FailedBeforeSaveWriter(std::exception_ptr error) : error_(std::move(error)) {}
  void set_up(int, bool) override { std::rethrow_exception(error_); }
  std::vector<SavePlan> prepare_global_plan(std::vector<SavePlan>) override {
    std::rethrow_exception(error_);
  }
  std::vector<WriteResult> write_data(const SavePlan&, SavePlanner&) override {
    std::rethrow_exception(error_);
  }
  void finish(Metadata, const std::vector<std::vector<WriteResult>>&) override {
    std::rethrow_exception(error_);
  }

 private:
  std::exception_ptr error_;
};

AsyncSaveResponse response_of(Future<void> staged, Future<Metadata> committed, bool skipped) {
  AsyncSaveResponse response;
  response.staging_completion = DeprecatedFuture<void>(staged);
  response.upload_completion = DeprecatedFuture<Metadata>(committed);
  response.staged = std::move(staged);
  response.committed = std::move(committed);
  response.skipped = skipped;
  return response;
}

}  // namespace

class AsyncCheckpointer::Impl {
 public:
  explicit Impl(AsyncCheckpointerOptions options)
      : options_(detail::fold_legacy_ranks(std::move(options), "AsyncCheckpointerOptions")),
        uploader_(
            [nice = options_.uploader_nice] { detail::lower_current_thread_priority(nice); }) {
    if (!options_.stager) {
      options_.stager = make_blocking_stager();
    }
    group_ = options_.ranks.process_group;
    const Ranks& ranks = options_.ranks;
    const int rank = detail::rank_for_store(ranks, "AsyncCheckpointerOptions");
    if (!group_ && ranks.store && ranks.world_size > 1) {
      group_ = make_gloo_process_group(ranks.store, rank, ranks.world_size, options_.group_options);
    }
    // Messages through an NCCL-only group travel on the current CUDA device of the thread that
    // sends them: the uploader's is this one's now, not its own default (cuda:0 on every rank).
    // Where the process has no CUDA device, such a group is refused here.
    message_device_ = detail::GroupCalls(group_, "AsyncCheckpointer").message_device();
    if (group_ && group_->getSize() > 1 && options_.in_flight_policy == InFlightPolicy::kSkip) {
      throw CheckpointError(
          ErrorKind::kUsage,
          "InFlightPolicy::kSkip cannot be used with a " + std::to_string(group_->getSize()) +
              "-rank process group: ranks could decide differently and the save would wait for the "
              "skipping rank until the group's timeout; use kWait");
    }
  }

  // uploader_, the last member, goes first: it finishes the job in flight.
  ~Impl() = default;

  // `make_writer` runs on the uploader thread, once the save is accepted (a skipped save creates
  // nothing, and opening a directory never delays the training thread); its errors fail the upload.
  AsyncSaveResponse async_save(const StateDict& state_dict,
                               const std::function<std::shared_ptr<StorageWriter>()>& make_writer,
                               const std::string& where) {
    std::lock_guard<std::mutex> call_lock(call_mutex_);  // one async_save at a time
    {
      std::unique_lock<std::mutex> lock(mutex_);
      if (job_) {
        switch (options_.in_flight_policy) {
          case InFlightPolicy::kWait:
            changed_.wait(lock, [this] { return !job_; });
            break;
          case InFlightPolicy::kSkip: {
            detail::logger().info("async save to {} skipped: the save to {} is still in flight",
                                  where, in_flight_where_);
            return response_of(make_ready_future(), make_ready_future(Metadata()), true);
          }
          case InFlightPolicy::kFail:
            throw CheckpointError(
                ErrorKind::kUsage,
                "async save to " + where + " refused: the save to " + in_flight_where_ +
                    " is still in flight; wait for its `committed` future first, or "
                    "use InFlightPolicy::kWait or kSkip");
        }
      }
    }
    Future<StateDict> staged = options_.stager->stage(state_dict);
    Promise<Metadata> upload;
    AsyncSaveResponse response = response_of(staged, upload.get_future(), false);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      job_.emplace(Job{staged, make_writer, where, std::move(upload)});
      in_flight_where_ = where;
    }
    uploader_.post([this] { upload_in_flight(); });
    if (options_.stager->should_synchronize_after_execute()) {
      options_.stager->synchronize_staging();
    }
    return response;
  }

  void wait() {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [this] { return !job_; });
  }

  bool in_flight() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return job_.has_value();
  }

  const AsyncCheckpointerOptions& options() const { return options_; }
  const c10::intrusive_ptr<c10d::ProcessGroup>& group() const { return group_; }

 private:
  struct Job {
    Future<StateDict> staged;
    std::function<std::shared_ptr<StorageWriter>()> make_writer;
    std::string where;
    Promise<Metadata> upload;
  };

  // On the uploader: uploads job_, then clears it.
  void upload_in_flight() {
    std::optional<Job> job;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      job.emplace(std::move(*job_));  // job_ stays engaged: the save is in flight until the end
    }
    Metadata committed;
    std::exception_ptr outcome = upload(*job, committed);
    Promise<Metadata> promise = std::move(job->upload);
    job.reset();  // drops the staged copy before the next save may stage into the buffers
    {
      // Idle and complete in one step: whoever sees the upload complete can start the next
      // save at once (even with kFail), and a kWait caller resumes only once it is complete.
      std::lock_guard<std::mutex> lock(mutex_);
      job_.reset();
      if (outcome) {
        promise.set_exception(outcome);
      } else {
        promise.set_value(std::move(committed));
      }
    }
    changed_.notify_all();
  }

  // Runs one save; returns its error (null when committed, its Metadata then in `committed`).
  // Never throws.
  std::exception_ptr upload(Job& job, Metadata& committed) {
    std::optional<c10::DeviceGuard> on_message_device;
    if (message_device_.is_cuda()) on_message_device.emplace(message_device_);
    SaveOptions save_options;
    save_options.ranks.process_group = group_;
    save_options.ranks.coordinator_rank = options_.ranks.coordinator_rank;
    save_options.planner = options_.planner;
    save_options.plan_cache = options_.plan_cache;
    save_options.replica_check = options_.replica_check;
    try {
      std::shared_ptr<StorageWriter> writer;
      std::exception_ptr early_error;
      try {
        writer = job.make_writer();
      } catch (...) {
        early_error = std::current_exception();
      }
      try {
        job.staged.wait();  // even when the writer failed: staging must end before the next save
      } catch (...) {
        if (!early_error) early_error = std::current_exception();
      }
      if (early_error) {
        if (group_ && group_->getSize() > 1) {
          // Every rank fails this save now rather than wait for this one until the timeout.
          FailedBeforeSaveWriter failed(early_error);
          save(StateDict(), failed, save_options);
        }
        std::rethrow_exception(early_error);
      }
      committed = save(job.staged.get(), *writer, save_options);
      return nullptr;
    } catch (const CheckpointError&) {
      return std::current_exception();
    } catch (...) {
      return std::make_exception_ptr(CheckpointError(
          ErrorKind::kUsage, "async save to " + job.where +
                                 " failed: " + detail::exception_message(std::current_exception()) +
                                 "; nothing was committed"));
    }
  }

  AsyncCheckpointerOptions options_;
  c10::intrusive_ptr<c10d::ProcessGroup> group_;
  at::Device message_device_ = at::kCPU;  // of group_, as the constructing thread saw it

  std::mutex call_mutex_;
  mutable std::mutex mutex_;  // guards job_ and in_flight_where_
  std::condition_variable changed_;
  std::optional<Job> job_;         // the save in flight (staging or uploading)
  std::string in_flight_where_;    // its directory, for messages
  detail::SerialWorker uploader_;  // runs the uploads, one at a time
};

AsyncCheckpointer::AsyncCheckpointer(AsyncCheckpointerOptions options)
    : impl_(std::make_unique<Impl>(std::move(options))) {}

AsyncCheckpointer::~AsyncCheckpointer() = default;

AsyncSaveResponse AsyncCheckpointer::async_save(const StateDict& state_dict,
                                                const Location& location) {
  const FileSystemWriterOptions options = impl_->options().file_system;
  const Location resolved = detail::with_default_s3(location, impl_->options().s3);
  return impl_->async_save(
      state_dict,
      [resolved, options]() -> std::shared_ptr<StorageWriter> {
        return make_storage_writer(resolved, options);
      },
      resolved.url());
}

AsyncSaveResponse AsyncCheckpointer::async_save(const StateDict& state_dict,
                                                std::shared_ptr<StorageWriter> storage_writer,
                                                const std::string& where) {
  if (!storage_writer) {
    throw CheckpointError(ErrorKind::kUsage,
                          "async_save: the storage writer is null; pass a writer, or a directory");
  }
  return impl_->async_save(
      state_dict, [storage_writer] { return storage_writer; },
      where.empty() ? std::string("its storage writer") : where);
}

void AsyncCheckpointer::wait() { impl_->wait(); }
bool AsyncCheckpointer::in_flight() const { return impl_->in_flight(); }
const c10::intrusive_ptr<c10d::ProcessGroup>& AsyncCheckpointer::process_group() const {
  return impl_->group();
}
AsyncStager& AsyncCheckpointer::stager() { return *impl_->options().stager; }

}  // namespace dcpp
