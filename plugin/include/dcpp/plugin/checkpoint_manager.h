#pragma once
// CheckpointManager: when and where checkpoints go. A root directory of step checkpoints
// (`step-00001200/`), saved synchronously or through an AsyncCheckpointer, committed by a rename,
// pruned by a RetentionPolicy off the training thread, and found again to resume.
//
// Commit protocol (every save, sync or async):
//   1. every rank saves its part with dcpp::save into `step-00001200.incomplete/` (over the
//      manager's process group); dcpp::save returns on every rank only after the coordinator wrote
//      and fsynced `.metadata`, i.e. after every rank's data is durable;
//   2. the coordinator rank then writes `dcpp_checkpoint.json` (tmp, fsync, rename) into it,
//      renames `step-00001200.incomplete` to `step-00001200` and fsyncs the root directory.
// Async saves do step 2 on the manager's background thread once the upload future completes.
// A job killed at any point leaves either a complete `step-...` directory or an `.incomplete` one,
// which latest() ignores and the next manager on this root removes. Renames and pruning assume
// every rank sees the same root (one machine, or a shared file system), as DCP's writer does,
// unless `node_local_root` says each host has its own (then each host's first rank commits its
// directory, and the steps resume from the remote tier).

#include <dcpp/async/async_stager.h>
#include <dcpp/async/future.h>
#include <dcpp/checkpoint/read_once.h>
#include <dcpp/checkpoint/replica_check.h>
#include <dcpp/core/deprecated_field.h>
#include <dcpp/core/export.h>
#include <dcpp/dist/ranks.h>
#include <dcpp/plugin/checkpoint_info.h>
#include <dcpp/plugin/checkpoint_kind.h>
#include <dcpp/plugin/memory_tier.h>
#include <dcpp/plugin/remote_tier.h>
#include <dcpp/plugin/retention_policy.h>
#include <dcpp/state_dict/state_dict.h>
#include <dcpp/storage/filesystem_writer_options.h>

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <c10/core/ScalarType.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace dcpp {

struct DCPP_API CheckpointManagerOptions {
  /// The directory holding the step checkpoints (created when missing). An object store is a
  /// remote tier (`remote`) beside it, never the root itself.
  std::filesystem::path root;
  /// An object store ("s3://bucket/prefix") the committed steps drain to, with a retention of its
  /// own (<dcpp/plugin/remote_tier.h>); empty url: none.
  RemoteTierOptions remote;
  /// The root is a directory on each host's own disk (node-local NVMe, at the same path on every
  /// host), not one directory every rank sees. Each host's directory then holds the files of its
  /// own ranks: the ranks sharing it (found when the manager is made) commit it by their lowest
  /// rank, which also drains its files to the remote tier, required here; the coordinator writes
  /// the remote step's `.metadata` once every host's files are up. A resume reads from the
  /// store, so a job can restart on other hosts, or on another number of ranks. export_state()
  /// is refused (an export scattered over hosts is no file to hand on). docs/storage.md.
  bool node_local_root = false;
  /// How the steps are named and written (checkpoint_info.h): dcpp's `step-00001200/` (the
  /// default), or Megatron-LM's `iter_0001200/` in Megatron-Core's layout with
  /// `latest_checkpointed_iteration.txt` (docs/megatron.md), which Megatron-LM resumes from. A root
  /// of its own only, for now: not with a remote tier or a node-local root. Restores read either.
  StepNames step_names = StepNames::kDcpp;
  /// A memory tier (<dcpp/plugin/memory_tier.h>): every N-th step kept in shared memory that
  /// outlives the rank's process, which restore() prefers (docs/plugin.md, "Memory tier").
  /// Default: none.
  MemoryTierOptions memory;
  /// Save every N steps (0: never by step count) and/or every T seconds (0: never by time);
  /// see is_save_due().
  int64_t save_every_steps = 0;
  double save_every_seconds = 0;
  /// The clock save_every_seconds is measured on; empty: std::chrono::steady_clock::now. Tests
  /// (and loops that run on simulated time) supply their own; it is called on the training thread.
  std::function<std::chrono::steady_clock::time_point()> clock;
  /// Save through an AsyncCheckpointer (the training thread waits only for staging) or block.
  bool async = true;
  /// The async stager; default: the blocking stager (staging done when save() returns).
  std::shared_ptr<AsyncStager> stager;
  RetentionPolicy retention;
  /// Data files, fsync. `overwrite` is forced on for the temporary directory.
  FileSystemWriterOptions file_system;
  /// Bytes of the root's file system that saves leave free. Before each save the coordinator
  /// checks that the free space, less these, holds another step as large as the newest one;
  /// otherwise the save fails on every rank before it writes anything (kIo, naming the root, the
  /// sizes and, with a remote tier, the steps waiting for the drain), rather than filling the
  /// disk partway through.
  uint64_t reserved_disk_bytes = 0;
  /// Plan caching (SavePlanCache): a periodic save of a state with the structure of the last
  /// one skips global planning. Exports never use it.
  bool plan_caching = true;
  /// Replicated items that differ across ranks (SaveOptions::replica_check): fail the save (the
  /// default), warn, or do not check.
  ReplicaCheck replica_check = ReplicaCheck::kFail;
  /// Who reads the bytes that several ranks need when restoring (LoadOptions::read_once): by
  /// default one rank reads them and sends them to the others on a network file system, and
  /// every rank reads for itself on a local disk.
  ReadOnce read_once = ReadOnce::kAuto;

  /// Several ranks (Ranks): either `ranks.process_group` (used from the training thread: sync
  /// saves, loads, the agreement collectives; keep it apart from the training loop's group) and,
  /// for async saves, `async_process_group` (used only by the background uploads); or
  /// `ranks.store` with `ranks.rank` and `ranks.world_size` (with_store), from which the manager
  /// makes both (Gloo groups "dcpp-manager" and "dcpp-manager-async"; the N-th manager a rank
  /// makes from a store adds "-N", so managers made in the same order on every rank, one after
  /// the other or side by side, never share a group). Neither: one process.
  /// `ranks.coordinator_rank` writes `.metadata`, the manifest, renames and prunes.
  Ranks ranks;
  /// Deprecated in 0.2, removed in 0.3: what `ranks.process_group` and `ranks.coordinator_rank`
  /// were called in 0.1. A value assigned here is honoured when `ranks` leaves that field at its
  /// default; assigned here and set there to another value, the call fails (kUsage).
  DeprecatedField<c10::intrusive_ptr<c10d::ProcessGroup>> process_group;
  DeprecatedField<int> coordinator_rank;
  /// With `ranks.process_group` and async saves: the group the background uploads use.
  c10::intrusive_ptr<c10d::ProcessGroup> async_process_group;
  /// Deprecated in 0.2, removed in 0.3: `ranks.store`, `ranks.rank`, `ranks.world_size`
  /// (with_store()).
  DeprecatedRanksField<c10::intrusive_ptr<c10d::Store>> store;
  DeprecatedRanksField<int> rank;
  DeprecatedRanksField<int> world_size;

  /// Append one JSON object per save and load phase to this file (coordinator rank only);
  /// empty: off.
  std::filesystem::path metrics_file;

  CheckpointManagerOptions& with_root(std::filesystem::path value) {
    root = std::move(value);
    return *this;
  }
  CheckpointManagerOptions& with_remote(RemoteTierOptions value) {
    remote = std::move(value);
    return *this;
  }
  CheckpointManagerOptions& with_node_local_root(bool value) {
    node_local_root = value;
    return *this;
  }
  CheckpointManagerOptions& with_step_names(StepNames value) {
    step_names = value;
    return *this;
  }
  CheckpointManagerOptions& with_reserved_disk_bytes(uint64_t value) {
    reserved_disk_bytes = value;
    return *this;
  }
  CheckpointManagerOptions& with_memory(MemoryTierOptions value) {
    memory = std::move(value);
    return *this;
  }
  CheckpointManagerOptions& with_save_every_steps(int64_t n) {
    save_every_steps = n;
    return *this;
  }
  CheckpointManagerOptions& with_save_every_seconds(double seconds) {
    save_every_seconds = seconds;
    return *this;
  }
  CheckpointManagerOptions& with_clock(
      std::function<std::chrono::steady_clock::time_point()> value) {
    clock = std::move(value);
    return *this;
  }
  CheckpointManagerOptions& with_async(bool value) {
    async = value;
    return *this;
  }
  CheckpointManagerOptions& with_plan_caching(bool value) {
    plan_caching = value;
    return *this;
  }
  CheckpointManagerOptions& with_replica_check(ReplicaCheck value) {
    replica_check = value;
    return *this;
  }
  CheckpointManagerOptions& with_read_once(ReadOnce value) {
    read_once = value;
    return *this;
  }
  CheckpointManagerOptions& with_stager(std::shared_ptr<AsyncStager> value) {
    stager = std::move(value);
    return *this;
  }
  CheckpointManagerOptions& with_retention(RetentionPolicy value) {
    retention = std::move(value);
    return *this;
  }
  CheckpointManagerOptions& with_file_system(FileSystemWriterOptions value) {
    file_system = std::move(value);
    return *this;
  }
  CheckpointManagerOptions& with_ranks(Ranks value) {
    ranks = std::move(value);
    return *this;
  }
  CheckpointManagerOptions& with_process_group(c10::intrusive_ptr<c10d::ProcessGroup> value) {
    ranks.with_process_group(std::move(value));
    return *this;
  }
  CheckpointManagerOptions& with_coordinator_rank(int value) {
    ranks.with_coordinator_rank(value);
    return *this;
  }
  CheckpointManagerOptions& with_async_process_group(c10::intrusive_ptr<c10d::ProcessGroup> value) {
    async_process_group = std::move(value);
    return *this;
  }
  CheckpointManagerOptions& with_store(c10::intrusive_ptr<c10d::Store> value, int rank_,
                                       int world_size_) {
    ranks.with_store(std::move(value), rank_, world_size_);
    return *this;
  }
  CheckpointManagerOptions& with_metrics_file(std::filesystem::path value) {
    metrics_file = std::move(value);
    return *this;
  }
};

/// What one save records along with the state.
struct DCPP_API SaveRequest {
  int64_t step = 0;
  int64_t epoch = 0;
  /// Numbers to rank checkpoints by (RetentionPolicy::keep_best), such as "loss".
  std::map<std::string, double> metrics;
  /// What the application says the checkpoint holds (checkpoint_info.h).
  ContentMetadata content;

  SaveRequest& with_step(int64_t value) {
    step = value;
    return *this;
  }
  SaveRequest& with_epoch(int64_t value) {
    epoch = value;
    return *this;
  }
  /// Sets one metric, keeping the others.
  SaveRequest& with_metric(std::string name, double value) {
    metrics[std::move(name)] = value;
    return *this;
  }
  SaveRequest& with_metrics(std::map<std::string, double> value) {
    metrics = std::move(value);
    return *this;
  }
  SaveRequest& with_content(ContentMetadata value) {
    content = std::move(value);
    return *this;
  }
};

/// The two moments of a managed save.
struct DCPP_API ManagedSave {
  /// The directory the checkpoint has once committed.
  std::filesystem::path path;
  /// Completes when the training loop may change its tensors again.
  Future<void> staged;
  /// Completes when the checkpoint is committed: on the coordinator after the rename, on the other
  /// ranks once their upload completed (the coordinator's rename may still follow). Fails with
  /// the save's CheckpointError; nothing is committed then.
  Future<void> committed;
  /// True when a complete checkpoint of this step already existed (committed by this manager, or
  /// found on disk), so nothing was saved. A save that failed leaves none: saving that step again
  /// writes it.
  bool already_saved = false;
  /// Deprecated in 0.2, removed in 0.3: `already_saved` under 0.1's name (an AsyncSaveResponse's
  /// `skipped` says another save was in flight).
  DeprecatedSkipped<bool> skipped;
};

/// Timings of one save as this rank saw them (the report of the demo, the metrics file).
struct DCPP_API SaveRecord {
  int64_t step = 0;
  /// kFull for save(), kExport for export_state().
  CheckpointKind kind = CheckpointKind::kFull;
  /// A save of the memory tier (save_to_memory(), or the memory copy save() makes first), not a
  /// step checkpoint.
  bool in_memory = false;
  bool async = false;
  /// Bytes of the tensors in this rank's state (what it staged), and bytes of the items this rank
  /// wrote (a chunk several ranks hold is written by one of them only).
  int64_t bytes = 0;
  int64_t written_bytes = 0;
  double plan_seconds = 0, stage_seconds = 0, write_seconds = 0, commit_seconds = 0;
  bool ok = false;
  std::string error;
};

/// Which checkpoint restore() loads.
struct DCPP_API RestoreRequest {
  /// A given checkpoint directory (or a remote step's "s3://" URL); else the given `step` (the
  /// local copy, else the remote tier's); else the latest complete one of either tier.
  std::filesystem::path path;
  std::optional<int64_t> step;
  /// Keys (DCP's flattened names, e.g. "optim" or "extra.data_loader") left out of the load:
  /// a key drops that item and everything under it. Stateful objects are dropped only whole.
  std::vector<std::string> exclude_from_loading;
  /// Also load what is present and leave keys the checkpoint lacks untouched.
  bool allow_partial_load = false;
  /// A restore that fails leaves the state as it was (LoadOptions::all_or_nothing), for one more
  /// copy of it in memory while it runs.
  bool all_or_nothing = false;
  /// When the latest checkpoint (no `path` or `step` given) fails to load (corrupt, missing or
  /// unreadable: kCorrupt, kNotFound, kIo), every rank logs why and loads the next older one,
  /// and so on; the saves after it fork from it, as after any rollback. Off: the first failure
  /// is thrown.
  bool fall_back = true;

  RestoreRequest& with_path(std::filesystem::path value) {
    path = std::move(value);
    return *this;
  }
  RestoreRequest& with_step(int64_t value) {
    step = value;
    return *this;
  }
  RestoreRequest& with_exclude_from_loading(std::vector<std::string> keys) {
    exclude_from_loading = std::move(keys);
    return *this;
  }
  RestoreRequest& with_allow_partial_load(bool value) {
    allow_partial_load = value;
    return *this;
  }
  RestoreRequest& with_all_or_nothing(bool value) {
    all_or_nothing = value;
    return *this;
  }
  RestoreRequest& with_fall_back(bool value) {
    fall_back = value;
    return *this;
  }
};

/// Owns the step checkpoints under one root. Every member function that saves, loads or decides
/// for several ranks is collective over the manager's process group: call it on every rank, in the
/// same order, from the training thread. Not thread-safe (one training thread); its background
/// thread (finishing async saves, pruning) is internal.
class DCPP_API CheckpointManager {
 public:
  /// Collective (makes the groups from `store`, then the coordinator's outcome broadcast): the
  /// coordinator creates the root and removes the `.incomplete` and `.deleting` directories an
  /// earlier killed job left there. Throws CheckpointError when a group cannot be made, and, on
  /// every rank, naming the root and the cause, when the root cannot be created or cleaned; with
  /// a remote tier, naming the ranks, when one has no credentials, or the bucket is missing. A
  /// store that cannot be reached is a warning: the job works locally, the drains try again.
  explicit CheckpointManager(CheckpointManagerOptions options);
  /// Waits for the save in flight and pending pruning; never throws (errors are logged).
  ~CheckpointManager();
  CheckpointManager(const CheckpointManager&) = delete;
  CheckpointManager& operator=(const CheckpointManager&) = delete;

  const CheckpointManagerOptions& options() const;
  int rank() const;
  int world_size() const;
  /// The group used from the training thread (null for one process).
  const c10::intrusive_ptr<c10d::ProcessGroup>& process_group() const;

  /// Local and cheap: whether `step` is a multiple of save_every_steps or save_every_seconds
  /// passed since the last save on this rank. With a time rule and several ranks the ranks may
  /// disagree: CheckpointCallback agrees through an all-reduce before saving.
  bool is_save_due(int64_t step) const;

  /// Local and cheap: whether the memory tier keeps `step` (a multiple of memory.every_steps).
  bool is_memory_save_due(int64_t step) const;

  /// Not collective (the ranks agree when restoring): copies `state` (Stateful values resolved
  /// here) into this rank's memory slot as step `request.step`, on the calling thread, and
  /// returns once it is complete there; the slot holding the newest complete step is never
  /// touched. With replicas (MemoryTierOptions::replicas) the step is then sent to them in the
  /// background; this waits only while the step before the last is still being sent. Returns
  /// false, having logged the error and recorded it in history() (where
  /// CheckpointCallback counts failed saves), when the copy failed, and false at once without a
  /// memory tier. Never throws.
  ///
  /// With MemoryTierOptions::copy_while_training the Stateful values are resolved here and the
  /// rest (planning, the copy) runs on the memory tier's background thread: this returns true
  /// once it is queued, its outcome goes to history() when it ends, and the caller must not
  /// change the state's tensors until wait_for_memory_copy() returns.
  bool save_to_memory(const StateDict& state, const SaveRequest& request);

  /// Blocks until the memory steps queued by save_to_memory() (and save()) with
  /// MemoryTierOptions::copy_while_training are in their slots, or failed (recorded in
  /// history()); the state's tensors may change after it. At once otherwise. Never throws.
  /// restore(), release_memory(), wait_for_memory_replicas(), wait() and the destructor wait
  /// for them first; later memory saves are queued behind them.
  void wait_for_memory_copy();

  /// Blocks until every memory step saved so far has been sent to this rank's replicas and theirs
  /// received (MemoryTierOptions::replicas; at once without them), or replication stopped on a
  /// failure (logged). Not collective, but it waits for the peers' rounds: call it on every rank.
  void wait_for_memory_replicas();

  /// Removes this rank's memory regions and the replicas it keeps (CheckpointCallback does once a
  /// training ended and its last step is on disk), after wait_for_memory_replicas(). A later
  /// save_to_memory makes them again.
  void release_memory();

  /// Collective: saves `state` (Stateful values resolved here, on the calling thread) as step
  /// `request.step`. With a memory tier that keeps the step, first copies it there
  /// (save_to_memory). Async: returns after staging started (blocking stager: done) and the upload
  /// is queued, waiting first for a previous save still in flight; sync: returns after the commit.
  /// A complete checkpoint of this step already present: skipped (a save of this step still in
  /// flight is waited for first, and decides). Throws CheckpointError only for
  /// a sync save that failed; async errors travel in `committed` (and are logged).
  ManagedSave save(const StateDict& state, const SaveRequest& request);

  /// Collective, blocking: saves the tensors of `state` (e.g. the model's state dict) cast to
  /// `dtype` when given (floating tensors only) as `export-step-<step>/`, CheckpointKind::kExport,
  /// committed like a step checkpoint. latest() never returns exports.
  std::filesystem::path export_state(const StateDict& state, const SaveRequest& request,
                                     std::optional<at::ScalarType> dtype = std::nullopt);

  /// Collective, blocking: loads the checkpoint `request` names into `state` in place. With a
  /// memory tier and no `request.path`, the newest step that every rank holds in memory (of one
  /// save, by a job of this world size; `request.step` if given) is loaded when it is at least as
  /// new as the other tiers' newest, each rank from its own slot; when that fails on any rank
  /// (a slot gone or corrupted, another layout), every rank goes on to the other tiers, with a
  /// warning. Otherwise the
  /// coordinator picks the latest resumable one, of the local root or the remote tier, the local
  /// copy when both hold that step, and tells the others, so every rank loads the same one; a
  /// store it cannot reach leaves the root's, with a warning, or, when the root holds none,
  /// throws kIo). Returns its manifest, or nullopt when there is nothing to resume from (no
  /// complete checkpoint; a given step or path that does not exist throws CheckpointError
  /// instead). Restoring an older step than the newest, then saving, is a rollback
  /// (docs/storage.md, "Rollbacks"). With a node-local root the hosts first drain what they
  /// committed (as wait_for_remote), and only steps the remote tier holds are resumed.
  std::optional<CheckpointInfo> restore(StateDict& state, const RestoreRequest& request = {});

  /// The complete checkpoints under the root, ascending by step; never an incomplete one.
  std::vector<CheckpointInfo> list() const;
  /// The complete checkpoints of the remote tier, ascending by step (`path` is the step's URL);
  /// empty without one. Lists the store: throws CheckpointError when it cannot be reached.
  std::vector<CheckpointInfo> list_remote() const;
  /// The resumable checkpoint with the highest step, of the root or the remote tier (the local
  /// one when both hold it; the root's alone, with a warning, when the store cannot be reached).
  std::optional<CheckpointInfo> latest() const;

  /// Blocks until every save in flight is committed (or failed) and local pruning is done; with
  /// a remote tier, not for the drain (see wait_for_remote). Throws the first CheckpointError of
  /// an async save not yet reported by wait(); later calls do not.
  void wait();
  /// wait(), then, on the coordinator, until every step committed so far is drained to the remote
  /// tier (and both tiers pruned), trying at once the steps whose copy failed (the drain after a
  /// commit tries them only after a backoff, 5 s doubling up to 5 min, and copies the newer steps
  /// meanwhile); other ranks do not drain. Throws the first drain error not yet reported (the
  /// failed step stays local, and later drains try it again), else what wait() throws. The
  /// destructor also waits for the drain passes posted, without the extra try. With a node-local
  /// root on several ranks it is collective (call it on every rank): every host copies its
  /// files, the coordinator commits, and a drain error on any rank is thrown on every rank.
  void wait_for_remote();
  /// The saves this rank made, in order (completed ones carry their timings): every step
  /// checkpoint and export, and of the memory tier's copies the newest 64 (a loop makes one every
  /// step; older ones are dropped).
  std::vector<SaveRecord> history() const;
  /// The newest `count` records of history(), in order: what a loop looks at every step.
  std::vector<SaveRecord> history(std::size_t count) const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace dcpp
