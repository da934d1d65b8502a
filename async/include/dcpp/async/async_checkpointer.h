#pragma once
// async_save: DCP's `torch.distributed.checkpoint.async_save`, as a checkpointer object that owns
// the stager, the background uploader thread and (with several ranks) a process group of its own.

#include <dcpp/async/async_stager.h>
#include <dcpp/async/future.h>
#include <dcpp/checkpoint/replica_check.h>
#include <dcpp/checkpoint/save_plan_cache.h>
#include <dcpp/core/deprecated_field.h>
#include <dcpp/core/export.h>
#include <dcpp/dist/process_group.h>
#include <dcpp/dist/ranks.h>
#include <dcpp/format/metadata.h>
#include <dcpp/state_dict/state_dict.h>
#include <dcpp/storage/filesystem_writer_options.h>
#include <dcpp/storage/location.h>
#include <dcpp/storage/s3_options.h>

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <filesystem>
#include <memory>
#include <utility>

namespace dcpp {

// The extension points an option may name (<dcpp/extend.h> declares them).
class SavePlanner;
class StorageWriter;

/// DCP's `AsyncSaveResponse`: the two moments of an asynchronous save, named as the
/// CheckpointManager's ManagedSave names them.
struct DCPP_API AsyncSaveResponse {
  /// Completes when the state dict has been copied into staging buffers: from then on the training
  /// loop may change its tensors. Fails (rethrowing on wait()) when staging failed; the upload
  /// then fails with the same error and nothing is written. (DCP: `staging_completion`.)
  Future<void> staged;
  /// Completes when the checkpoint is committed (its `.metadata` is in place and durable, as
  /// dcpp::save returns), with the checkpoint's Metadata (what dcpp::save returns; DCP's
  /// async_save future holds it too; empty when skipped). Fails with the save's CheckpointError
  /// otherwise; nothing is committed then, and a checkpoint already in the directory is not
  /// damaged. (DCP: `upload_completion`.)
  Future<Metadata> committed;
  /// True when the save was not started because another was in flight (InFlightPolicy::kSkip);
  /// both futures are then complete without error and nothing was written.
  bool skipped = false;
  /// Deprecated in 0.2, removed in 0.3: `staged` and `committed` under 0.1's names (the same
  /// futures).
  DeprecatedFuture<void> staging_completion;
  DeprecatedFuture<Metadata> upload_completion;
};

/// What async_save does when the previous save is still in flight (its upload not complete).
enum class InFlightPolicy {
  /// Block until the previous upload completes, then start this save (the default).
  kWait,
  /// Return at once a response with `skipped` set; nothing is saved. One rank only (see below).
  kSkip,
  /// Throw a CheckpointError at once; nothing is saved.
  kFail,
};

struct DCPP_API AsyncCheckpointerOptions {
  /// The stager; default make_blocking_stager(). Owned by the checkpointer from then on.
  std::shared_ptr<AsyncStager> stager;
  /// At most one save is in flight; this says what a second async_save does meanwhile. With
  /// several ranks every rank must decide alike, which only kWait guarantees: kSkip is refused
  /// there (CheckpointError at construction); with kFail, a rank that refuses leaves the other
  /// ranks' save waiting for it until the group's timeout, then failing.
  InFlightPolicy in_flight_policy = InFlightPolicy::kWait;

  /// Several ranks (Ranks): `ranks.process_group`, a process group used only by this
  /// checkpointer's background saves (never the training loop's: c10d groups are not thread-safe,
  /// and collectives from two threads would interleave), or `ranks.store` (with_store), from which
  /// the checkpointer makes a Gloo group of `ranks.world_size` ranks named
  /// `group_options.group_name`. `ranks.coordinator_rank` writes `.metadata`.
  Ranks ranks;
  /// Deprecated in 0.2, removed in 0.3: what `ranks.process_group` and `ranks.coordinator_rank`
  /// were called in 0.1. A value assigned here is honoured when `ranks` leaves that field at its
  /// default; assigned here and set there to another value, the call fails (kUsage).
  DeprecatedField<c10::intrusive_ptr<c10d::ProcessGroup>> process_group;
  DeprecatedField<int> coordinator_rank;
  /// Deprecated in 0.2, removed in 0.3: `ranks.store`, `ranks.rank`, `ranks.world_size`
  /// (with_store()).
  DeprecatedRanksField<c10::intrusive_ptr<c10d::Store>> store;
  DeprecatedRanksField<int> rank;
  DeprecatedRanksField<int> world_size;
  ProcessGroupOptions group_options = ProcessGroupOptions().with_group_name("dcpp-async");

  /// Writer options for async_save(state, directory); default planner when null.
  FileSystemWriterOptions file_system;
  /// The object store when async_save's directory is an "s3://bucket/prefix" URL
  /// (docs/storage.md).
  S3Options s3;
  std::shared_ptr<SavePlanner> planner;
  /// Plan caching for the uploads (SaveOptions::plan_cache), one save at a time; null: none.
  std::shared_ptr<SavePlanCache> plan_cache;
  /// Replicated items that differ across ranks (SaveOptions::replica_check): fail the save (the
  /// default), warn, or do not check.
  ReplicaCheck replica_check = ReplicaCheck::kFail;
  /// Nice value of the uploader thread and the writer threads it starts (0 to 19; 0 leaves it as
  /// is), so that writing yields the CPU to the training loop; 19 (the default) writes on CPU time
  /// the loop leaves idle.
  int uploader_nice = 19;

  AsyncCheckpointerOptions& with_stager(std::shared_ptr<AsyncStager> value) {
    stager = std::move(value);
    return *this;
  }
  AsyncCheckpointerOptions& with_in_flight_policy(InFlightPolicy value) {
    in_flight_policy = value;
    return *this;
  }
  AsyncCheckpointerOptions& with_ranks(Ranks value) {
    ranks = std::move(value);
    return *this;
  }
  AsyncCheckpointerOptions& with_process_group(c10::intrusive_ptr<c10d::ProcessGroup> value) {
    ranks.with_process_group(std::move(value));
    return *this;
  }
  AsyncCheckpointerOptions& with_coordinator_rank(int value) {
    ranks.with_coordinator_rank(value);
    return *this;
  }
  AsyncCheckpointerOptions& with_store(c10::intrusive_ptr<c10d::Store> value, int rank_,
                                       int world_size_) {
    ranks.with_store(std::move(value), rank_, world_size_);
    return *this;
  }
  AsyncCheckpointerOptions& with_group_options(ProcessGroupOptions value) {
    group_options = std::move(value);
    return *this;
  }
  AsyncCheckpointerOptions& with_file_system(FileSystemWriterOptions value) {
    file_system = std::move(value);
    return *this;
  }
  AsyncCheckpointerOptions& with_s3(S3Options value) {
    s3 = std::move(value);
    return *this;
  }
  AsyncCheckpointerOptions& with_planner(std::shared_ptr<SavePlanner> value) {
    planner = std::move(value);
    return *this;
  }
  AsyncCheckpointerOptions& with_plan_cache(std::shared_ptr<SavePlanCache> value) {
    plan_cache = std::move(value);
    return *this;
  }
  AsyncCheckpointerOptions& with_replica_check(ReplicaCheck value) {
    replica_check = value;
    return *this;
  }
  AsyncCheckpointerOptions& with_uploader_nice(int value) {
    uploader_nice = value;
    return *this;
  }
};

/// Saves state dicts in the background, one at a time. async_save stages (through the stager) and
/// hands the staged copy to a background thread that runs dcpp::save on it (over the
/// checkpointer's own process group when there are several ranks).
///
/// Thread-safety: async_save, wait and in_flight may be called from any thread; calls are
/// serialised. Destruction waits for the save in flight to finish (commit or fail), then stops
/// the background thread; it never throws.
class DCPP_API AsyncCheckpointer {
 public:
  /// With `options.store` and world_size > 1: collective, blocking until every rank has made the
  /// group; throws CheckpointError when that fails, or when kSkip is asked with several ranks.
  explicit AsyncCheckpointer(AsyncCheckpointerOptions options = {});
  ~AsyncCheckpointer();
  AsyncCheckpointer(const AsyncCheckpointer&) = delete;
  AsyncCheckpointer& operator=(const AsyncCheckpointer&) = delete;

  /// Saves `state_dict` as a DCP checkpoint at `location`, as dcpp::save does (a directory, an
  /// "s3://bucket/prefix" URL or a registered driver's URL; the writer
  /// make_storage_writer(location, options.file_system) makes, `options.s3` for an s3:// location
  /// without S3 options of its own). Returns once staging has started (blocking stager:
  /// once it is done) and the upload is queued. With a previous save in flight, first applies the
  /// in-flight policy: waits (kWait), returns a skipped response (kSkip) or throws CheckpointError
  /// (kFail). Otherwise never throws: staging and upload errors travel in the response's futures.
  AsyncSaveResponse async_save(const StateDict& state_dict, const Location& location);
  /// The same, writing through `storage_writer` (kept alive until the upload completes). `where`
  /// names the destination in messages (the in-flight policy's, a failed upload's); empty: "its
  /// storage writer".
  AsyncSaveResponse async_save(const StateDict& state_dict,
                               std::shared_ptr<StorageWriter> storage_writer,
                               const std::string& where = {});

  /// Blocks until no save is in flight. Never throws (errors are in the responses).
  void wait();
  /// Whether a save is in flight (its upload not complete). Never blocks.
  bool in_flight() const;
  /// The process group the background saves use (null for one rank).
  const c10::intrusive_ptr<c10d::ProcessGroup>& process_group() const;
  AsyncStager& stager();

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace dcpp
