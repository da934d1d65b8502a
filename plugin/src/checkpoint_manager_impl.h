#pragma once
// CheckpointManager::Impl, private to the plugin: the manager's operations, one concept per source
// file, over state that only they see (checkpoint_manager.cpp is the public class, forwarding to
// Impl's public members):
//   manager_setup.cpp       the constructor: process groups, the AsyncCheckpointer, the root
//                           prepared (created, leftovers of a killed job removed)
//   save_schedule.h         when a save is due: the step and time rules
//   managed_save.cpp        save(): sync and async saves, written, then committed
//   checkpoint_commit.h     the commit protocol: manifest, rename to `step-...`, fsync of the root
//   checkpoint_pruning.h    retention: pruning with the RetentionPolicy on the background worker
//   checkpoint_lineage.h    which run a checkpoint belongs to: save identities, rollbacks' forks
//   remote_tier.h           the remote tier: steps drained to an object store on the drain thread
//   memory_save.cpp         save_to_memory(): the memory tier's copies (memory_tier.h)
//   checkpoint_restore.cpp  restore(): the memory tier's agreed step, else the coordinator's
//                           choice of checkpoint, then the load
//   checkpoint_export.cpp   export_state()
//   save_history.h          what each save did: history(), the error wait() rethrows
//   rank_agreement.h        the collectives (the only c10d collective calls of the plugin)

#include "checkpoint_lineage.h"
#include "checkpoint_pruning.h"
#include "core/serial_worker.h"
#include "delayed_post.h"
#include "job_lock.h"
#include "memory_tier.h"
#include "phase_log.h"
#include "remote_tier.h"
#include "root_sharing.h"
#include "save_gate.h"
#include "save_history.h"
#include "save_schedule.h"
#include "stopwatch.h"

#include <dcpp/async/async_checkpointer.h>
#include <dcpp/plugin/checkpoint_manager.h>

#include <atomic>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <set>

namespace dcpp {

/// Not thread-safe, like CheckpointManager: the training thread calls its members; the background
/// worker runs only the tasks save() posts (async commits, pruning), which touch `history`, `log`
/// and the file system, never the members the training thread changes; with a remote tier, the
/// coordinator's drainer runs the drain passes (and the local pruning) the commits post.
/// Hidden: a nested class takes the visibility of the class around it, DCPP_API's default, so
/// without the attribute libdcpp_plugin would export Impl's out-of-line members (internals).
class [[gnu::visibility("hidden")]] CheckpointManager::Impl {
 public:
  // What CheckpointManager forwards to, and nothing else: the state below is private to the
  // operations' own files.

  /// manager_setup.cpp. Collective; throws as CheckpointManager's constructor says.
  explicit Impl(CheckpointManagerOptions options);

  /// What ~CheckpointManager does first: closes the pass that looks again for other hosts' files,
  /// then runs the drain passes posted so far, never collectively (ranks may end apart). Their
  /// errors were logged when they happened.
  void close() noexcept;

  /// As given, with the ranks folded (fold_legacy_ranks). Declared first: the state below reads it.
  const CheckpointManagerOptions options;

  int this_rank() const { return rank; }
  int world_size() const { return world; }
  const c10::intrusive_ptr<c10d::ProcessGroup>& process_group() const { return group; }
  bool is_save_due(int64_t step) const { return schedule.is_due(step); }
  bool is_memory_save_due(int64_t step) const { return memory && memory->is_due(step); }

  /// memory_save.cpp: CheckpointManager::save_to_memory and release_memory.
  bool save_to_memory(const StateDict& state, const SaveRequest& request);
  void wait_for_memory_replicas() {
    if (memory) memory->wait_for_replicas();
  }
  void wait_for_memory_copy() {
    if (memory) memory->wait_for_copy();
  }
  void release_memory() {
    if (memory) memory->release();
  }

  /// managed_save.cpp: CheckpointManager::save.
  ManagedSave save(const StateDict& state, const SaveRequest& request);

  /// checkpoint_export.cpp: CheckpointManager::export_state.
  std::filesystem::path export_state(const StateDict& state, const SaveRequest& request,
                                     std::optional<at::ScalarType> dtype);

  /// checkpoint_restore.cpp: CheckpointManager::restore.
  std::optional<CheckpointInfo> restore(StateDict & state, const RestoreRequest& request);

  /// checkpoint_restore.cpp: the newest resumable checkpoint of the root and the remote tier
  /// (checkpoint_lineage.h), the local one when both hold its step (lists the store; the root's
  /// alone, with a warning, when the store cannot be reached).
  std::optional<CheckpointInfo> latest() const;

  /// The remote tier's complete steps (lists the store); none without a remote tier.
  std::vector<CheckpointInfo> list_remote() const;

  /// CheckpointManager::wait: wait_until_idle(), then the first save error not yet taken.
  void wait();

  /// CheckpointManager::wait_for_remote: drain_to_remote(true), then the first error not yet
  /// taken.
  void wait_for_remote();

  /// What each save did, oldest first.
  std::vector<SaveRecord> records() const { return history.records(); }
  std::vector<SaveRecord> newest_records(std::size_t count) const {
    return history.newest_records(count);
  }

 private:
  bool is_coordinator() const { return rank == options.ranks.coordinator_rank; }
  /// Whether this rank commits (and drains) its root directory: the coordinator, and with a
  /// node-local root the first rank of each other host's ranks.
  bool is_root_leader() const { return sharing.leader_of.at(rank) == rank; }

  /// managed_save.cpp. Collective, blocking: saves `resolved` (no Stateful left) into
  /// `<final_path>.incomplete` and commits it as `final_path` with a manifest of `kind`; `record`
  /// (its step, kind, bytes and plan seconds filled in) returned with the write and commit
  /// timings and ok. Throws CheckpointError on every rank when any rank's save or the commit
  /// failed.
  SaveRecord save_blocking(const StateDict& resolved, const SaveRequest& request,
                           CheckpointKind kind, const std::filesystem::path& final_path,
                           SaveRecord record, const std::string& save_id = {});

  /// checkpoint_restore.cpp: the complete checkpoints of the root, then the remote tier's (lists
  /// the store). With `unreachable`, a store that cannot be reached (kIo, after the client's
  /// retries, or a step of it that cannot be read) is no error: a warning is logged,
  /// `*unreachable` set (and `*reason` to why) and the root's returned alone.
  std::vector<CheckpointInfo> all_checkpoints(bool* unreachable = nullptr,
                                              std::string* reason = nullptr) const;

  /// Coordinator, after each commit: without a remote tier, prune_checkpoints under the root
  /// with the options' policy, here; with one, a drain pass posted to the drainer (which prunes
  /// both tiers).
  void after_commit();

  /// Coordinator, on the drainer: one RemoteTier::drain pass; its error logged and kept for
  /// wait_for_remote(). `starting`: the pass a new manager posts (its lease and listing within
  /// the restart timeout, as those of the passes run after close() began).
  void drain_remote(bool retry_failed_now, bool starting = false);

  /// Blocks until the async save in flight is uploaded and committed and every task posted to the
  /// worker (commits, pruning) has run, and the memory copies queued have ended. Throws what
  /// AsyncCheckpointer::wait() throws.
  void wait_until_idle() {
    wait_for_memory_copy();
    if (checkpointer) checkpointer->wait();
    worker.wait_until_idle();
  }

  /// wait_until_idle(), then every drain pass posted so far, and with `retry_failed_now` one more
  /// that tries the steps whose copy failed at once. Throws the first drain error not yet taken.
  /// With a node-local root on several ranks and `collective`: settle_hosts instead.
  void drain_to_remote(bool retry_failed_now, bool collective = true);

  /// manager_drain.cpp, node-local roots. Collective: wait_until_idle() and this host's passes,
  /// then, in turn, a pass of the coordinator (replacing older saves' remote steps), of every other
  /// host's leader (copying its files), and of the coordinator (committing the steps whose files
  /// are all up). Throws CheckpointError (kIo) on every rank naming the ranks whose passes failed.
  void settle_hosts(bool retry_failed_now);

  // manager_setup.cpp
  void prepare_root();
  void clean_root();

  // memory_save.cpp: copies `resolved` into the memory tier (or queues the copy, with
  // copy_while_training); records the outcome, never throws.
  bool save_resolved_to_memory(const StateDict& resolved, const SaveRequest& request);
  // The end of a memory save: `record` completed with its bytes or `error`, logged, kept.
  bool finish_memory_save(SaveRecord record, detail::SteadyClock::time_point start, int64_t bytes,
                          std::exception_ptr error);

  // checkpoint_restore.cpp
  struct Chosen {
    CheckpointInfo info;     // its manifest, `path` where it is
    detail::Lineage saving;  // the lineage of the saves after a successful restore of it
  };
  // Loads `chosen`, one of the memory tier's complete steps, into `state`; nullopt when the load
  // failed on any rank (with a warning; `*failure` says why), and `*corrupted` when a rank passed
  // over a copy whose CRC-32 did not match (a replica may hold another).
  std::optional<CheckpointInfo> restore_from_memory(
      StateDict & state, const RestoreRequest& request, const Chosen& chosen, std::string* failure,
      bool* corrupted);
  // The checkpoint `request` names, else the latest resumable one below step `below` (any
  // without it), of the tiers' and `in_memory`'s (the memory tier's complete steps, the same on
  // every rank: chosen first of one step), but none whose path is in `failed` (they still count
  // for the lineage); nullopt when there is none.
  std::optional<Chosen> choose_checkpoint(const RestoreRequest& request,
                                          std::optional<int64_t> below = std::nullopt,
                                          const std::vector<CheckpointInfo>& in_memory = {},
                                          const std::set<std::string>& failed = {}) const;
  // Loads `chosen` into `state` (collective); throws what dcpp::load throws, on every rank.
  void load_chosen(StateDict & state, const RestoreRequest& request, const Chosen& chosen);
  std::vector<CheckpointInfo> restorable(const std::vector<CheckpointInfo>& all) const;
  CheckpointInfo manifest_of(const std::string& path) const;

  // managed_save.cpp
  bool holds_step_to_keep(const std::filesystem::path& path) const;
  // The writer of a save of `kind` into `temporary`, in the layout of options.step_names.
  detail::SaveGate gated_writer(const std::filesystem::path& temporary, CheckpointKind kind) const;
  // After the commit of a step of `kind`, on the root's leader: Megatron-LM's
  // latest_checkpointed_iteration.txt, with its step names.
  void record_committed_step(int64_t step, CheckpointKind kind) const;
  void check_disk_space() const;
  // On the root's leader, after a save into `temporary` failed on every rank: removes it.
  void remove_failed_save(const std::filesystem::path& temporary) const;
  // A step this root's leader committed, whose save failed on another host: removed.
  void withdraw_commit(const std::filesystem::path& final_path) const;
  // `save_id`: the save's identity, agreed by the ranks (node-local roots), or "" for a new one.
  ManagedSave save_sync(const StateDict& resolved, const SaveRequest& request, SaveRecord record,
                        ManagedSave result, const std::string& save_id);
  ManagedSave save_async(const StateDict& resolved, const SaveRequest& request, SaveRecord record,
                         ManagedSave result, const std::string& save_id);

  /// This job's locks on the root and its memory regions (job_lock.h), taken by prepare_root.
  /// Declared before the state that writes: released last.
  detail::JobLocks locks;
  /// Which ranks share the root (set by the constructor): one group, or with a node-local root
  /// one per host.
  detail::RootSharing sharing;
  detail::SaveSchedule schedule{options};
  c10::intrusive_ptr<c10d::ProcessGroup> group;  // null for one process
  int rank = 0;
  int world = 1;
  std::unique_ptr<AsyncCheckpointer> checkpointer;  // null for sync saves
  /// The plan cache of blocking periodic saves (null without plan caching); async saves have
  /// their own in the AsyncCheckpointer.
  std::shared_ptr<SavePlanCache> blocking_plan_cache;
  std::unique_ptr<detail::PhaseLog> log;
  /// Steps handed to an async save by save() (the training thread's own): a second save of one
  /// waits for the first's outcome.
  std::set<int64_t> async_steps;
  detail::SaveHistory history;
  /// The lineage of this manager's saves (checkpoint_lineage.h), the same on every rank: set by
  /// the constructor and by each restore (the coordinator decides, the others learn it).
  detail::Lineage lineage;
  /// The memory tier (null without one).
  std::unique_ptr<detail::MemoryTier> memory;
  /// The remote tier (null without one); drained by the coordinator only.
  std::unique_ptr<detail::RemoteTier> remote;
  /// When close() began (steady clock ticks), 0 before: the drain passes it waits for read the
  /// store within the restart timeout of it.
  std::atomic<int64_t> closing_since{0};
  std::mutex drain_error_mutex;
  std::exception_ptr drain_error;  // the first drain pass that failed, until wait_for_remote()

  /// Node-local root, coordinator: posts the pass that looks again for other hosts' files (null
  /// otherwise). Closed by close() before anything else; outlives the drainer.
  std::unique_ptr<detail::DelayedPost> host_recheck;
  int host_rechecks = 0;  // the pauses in a row before host_recheck's passes; the drainer's

  /// Runs the drain passes; destroyed after `worker` (whose commits post to it), before the rest.
  detail::SerialWorker drainer;
  /// Declared last: destroyed first, so its tasks finish while everything above is alive.
  detail::SerialWorker worker;
};

}  // namespace dcpp
