#pragma once
// The CheckpointManager's memory tier (memory_tier.h, the public options): this rank's two
// shared-memory slots (storage/memory_slots.h), each holding a memory step (storage/
// memory_step.h) with the manager's manifest, and the collective choice of the step to resume
// from: the newest step that every rank holds complete, of the same save, saved by a job of this
// world size.
//
// A memory save involves no other rank: it is a save without collectives into the rank's own
// slot; with replicas, a background thread then sends it to the rank's clique
// (memory_replication.h). The ranks agree only when restoring: on the newest step whose every
// saving rank's copy is on some host of the job (a rank's own slot, or a peer's replica), read
// locally where it is on the reader's host and sent over the group where it is not.

#include "core/serial_worker.h"
#include "memory_replication.h"
#include "rank_agreement.h"

#include <dcpp/storage/memory_slots.h>
#include <dcpp/storage/memory_step.h>

#include <dcpp/plugin/checkpoint_info.h>
#include <dcpp/plugin/memory_tier.h>
#include <dcpp/state_dict/state_dict.h>

#include <cstdint>
#include <exception>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

namespace dcpp::detail {

/// The regions' job name: `options.job`, or one derived from `root` ("root-" and 16 hex digits
/// of a hash of its absolute path).
std::string memory_job_name(const MemoryTierOptions& options, const std::filesystem::path& root);

/// What a save identity is compared as across ranks: a non-negative 62-bit hash of it.
int64_t save_id_key(const std::string& save_id);

/// Whether `path`, a restored checkpoint's (CheckpointInfo::path), is a memory step's region.
bool is_memory_tier_path(const std::filesystem::path& path);

class MemoryTier {
 public:
  /// Collective over `group` (null: one process): checks the options, agrees on the run's token
  /// (which names its saves), and with a cap checks /dev/shm's room on every rank. Throws
  /// CheckpointError on every rank naming the ranks whose check failed.
  MemoryTier(const MemoryTierOptions& options, const std::filesystem::path& root,
             const ProcessGroupPtr& group, int rank, int world, int coordinator);
  ~MemoryTier();

  bool is_due(int64_t step) const {
    return options_.every_steps > 0 && step % options_.every_steps == 0;
  }
  const std::string& job() const { return job_; }

  /// The save identity of this run's memory step `step`: the same on every rank.
  std::string save_id_of(int64_t step) const;

  /// Copies `resolved` (no Stateful left) into this rank's free slot as the step `manifest`
  /// names, with `manifest` (its save_id set to save_id_of(step)), and queues it for the
  /// replicas. Returns the bytes of the step. Throws CheckpointError when it does not fit, or the
  /// copy fails; the slot holding the newest complete step is never touched.
  int64_t save(const StateDict& resolved, const CheckpointInfo& manifest);
  /// A memory save that failed before save() was called: the replicas' round still runs (after
  /// the saves queued before it).
  void note_failed_save();

  /// MemoryTierOptions::copy_while_training.
  bool copies_while_training() const { return copier_ != nullptr; }
  /// With copy_while_training: save() on the memory tier's background thread, after the saves
  /// queued before it; `done` is called there with its bytes, or with its error. The tensors of
  /// `resolved` must not change until wait_for_copy() returns.
  void save_in_background(StateDict resolved, CheckpointInfo manifest,
                          std::function<void(int64_t bytes, std::exception_ptr error)> done);
  /// Blocks until every save queued by save_in_background has ended (at once without). Never
  /// throws.
  void wait_for_copy() {
    if (copier_) copier_->wait_until_idle();
  }

  /// Collective: the steps complete for every rank of the job that saved them, of one save, in
  /// the slots and replicas on the hosts of this job, whatever that job's world size, ascending
  /// by step. Each is described as a resume compares checkpoints: its step, its lineage
  /// (generation, branched_from, from its manifest), `world_size` (of the job that saved it),
  /// `save_id` "memory-" and its save key, and `path` naming it among this job's regions
  /// ("/dev/shm/dcpp.<job>/step-<step>-<save_id>": not a file; is_memory_tier_path). Their CRCs are
  /// not checked (verify() checks the one to load); copies whose CRC failed since start_restore()
  /// are left out. The same list on every rank; with what each rank found logged on the coordinator
  /// when none is complete.
  std::vector<CheckpointInfo> complete_steps();
  /// Forgets the copies load() passed over: a restore starts afresh.
  void start_restore() { passed_over_.clear(); }
  /// Takes `step` (one of complete_steps()) as the step load() loads. Throws CheckpointError
  /// (kNotFound) when it is none of them.
  void choose(const CheckpointInfo& step);

  /// What load() read, and from where (for the log).
  struct Loaded {
    CheckpointInfo info;
    std::string source;
  };
  /// Collective: loads the step choose() took into `target`: this rank's own step when the job
  /// that saved it had this world size, else every rank's, resharded through the load planner.
  /// Steps on this rank's host are read in place; the others are sent by the rank that found
  /// them, over the manager's group. Each copy's CRC-32 is checked as it is copied out (one pass
  /// over its bytes). Throws CheckpointError when a step does not arrive intact or does not load;
  /// a copy of this rank's whose CRC does not match is then passed over (complete_steps() leaves
  /// it out from then on), and `*passed_over` says so.
  Loaded load(StateDict& target, bool allow_partial_load, bool all_or_nothing, bool* passed_over);

  /// Blocks until the copies and then the replicas' rounds queued have run (at once without
  /// replicas).
  void wait_for_replicas() {
    wait_for_copy();
    if (replication_) replication_->drain();
  }

  /// Removes this rank's regions and the replicas it keeps (once the copies and their rounds
  /// have run), and on this host the regions of ranks the job does not have (left by a job of
  /// more ranks that this one resumed from).
  void release();

 private:
  // One complete step a rank found on its host, as the ranks tell each other.
  struct HeldStep {
    int64_t owner = -1;   // the rank that saved it
    int64_t holder = -1;  // the rank keeping it as a replica, -1: its owner's own slot
    int64_t step = -1;
    int64_t key = -1;  // of its save identity
    int64_t saved_world = 0;
    int64_t bytes = 0;
    int64_t crc32 = 0;
    int64_t node = -1;       // the host of the rank that found it
    int64_t generation = 0;  // its manifest's lineage
    int64_t branched_from = -1;
  };
  // A round of the replicas without a step (a failed save's), on the thread that saves.
  void run_empty_round();
  // This rank's host (GROUP_RANK, else rank / ranks per host).
  int64_t node_of_this_rank() const;
  // Every rank's findings exchanged (all_held_, by rank; nodes_ first).
  void exchange_findings();
  // The complete (step, save key, saved world) of all_held_ whose every saving rank's copy was
  // found, as complete_steps() describes them, and one HeldStep of each (its identity).
  std::vector<std::pair<CheckpointInfo, HeldStep>> complete_in_findings() const;
  // The steps on this host that this rank reads for the agreement (each region set is read by one
  // rank of the host), into held_ (kept, mapped) and their descriptions.
  std::vector<HeldStep> find_steps_on_host(const std::vector<int64_t>& nodes);

  MemoryTierOptions options_;
  std::string job_;
  ProcessGroupPtr group_;
  int rank_;
  int world_;
  int coordinator_;
  std::string run_token_;
  MemorySlots slots_;
  MemoryStepCache step_cache_;  // the layout, Metadata and value archives reused step to step
  std::unique_ptr<MemoryReplication> replication_;  // after slots_: stops before they go
  // What complete_steps found: every rank's steps (by rank), the steps this rank found (mapped,
  // parallel to all_held_[rank_]), and the step choose() took.
  std::vector<int64_t> nodes_;  // each rank's host
  std::vector<std::vector<HeldStep>> all_held_;
  std::vector<MemoryStep> held_;
  std::optional<HeldStep> chosen_;
  // Copies whose CRC failed in this agreement: (owner, holder, step), left out of its rounds.
  std::set<std::tuple<int64_t, int64_t, int64_t>> passed_over_;
  // With copy_while_training: runs the saves (and failed saves' rounds) in order. Last: destroyed
  // first, once every save queued has run, while everything it uses is alive.
  std::unique_ptr<SerialWorker> copier_;
};

}  // namespace dcpp::detail
