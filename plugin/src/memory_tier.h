#pragma once
// The CheckpointManager's memory tier (memory_tier.h, the public options): this rank's two
// shared-memory slots (storage/memory_slots.h), each holding a memory step (storage/
// memory_step.h) with the manager's manifest, and the collective choice of the step to resume
// from: the newest step that every rank holds complete, of the same save, saved by a job of this
// world size.
//
// A memory save involves no other rank: it is a save without collectives into the rank's own
// slot. The ranks agree only when restoring.

#include "rank_agreement.h"

#include <dcpp/storage/memory_slots.h>

#include <dcpp/plugin/checkpoint_info.h>
#include <dcpp/plugin/memory_tier.h>
#include <dcpp/state_dict/state_dict.h>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace dcpp::detail {

/// The regions' job name: `options.job`, or one derived from `root` ("root-" and 16 hex digits
/// of a hash of its absolute path).
std::string memory_job_name(const MemoryTierOptions& options, const std::filesystem::path& root);

/// Whether `path`, a restored checkpoint's (CheckpointInfo::path), is a memory step's region.
bool is_memory_tier_path(const std::filesystem::path& path);

class MemoryTier {
 public:
  /// Collective over `group` (null: one process): checks the options, agrees on the run's token
  /// (which names its saves), and with a cap checks /dev/shm's room on every rank. Throws
  /// CheckpointError on every rank naming the ranks whose check failed.
  MemoryTier(const MemoryTierOptions& options, const std::filesystem::path& root,
             const ProcessGroupPtr& group, int rank, int world, int coordinator);

  bool is_due(int64_t step) const {
    return options_.every_steps > 0 && step % options_.every_steps == 0;
  }
  const std::string& job() const { return job_; }

  /// The save identity of this run's memory step `step`: the same on every rank.
  std::string save_id_of(int64_t step) const;

  /// Copies `resolved` (no Stateful left) into this rank's free slot as the step `manifest`
  /// names, with `manifest` (its save_id set to save_id_of(step)). Returns the bytes of the step.
  /// Throws CheckpointError when it does not fit, or the copy fails; the slot holding the newest
  /// complete step is never touched.
  int64_t save(const StateDict& resolved, const CheckpointInfo& manifest);

  /// Collective: the step that every rank holds complete in memory (a CRC-checked slot), of the
  /// same save and of a job of this world size, the newest such; `wanted`: that step only.
  /// nullopt when there is none (logged on the coordinator, with what each rank's slots hold).
  std::optional<int64_t> agreed_step(std::optional<int64_t> wanted) const;

  /// Loads this rank's memory step `step` into `target` (a load without collectives over its
  /// own step), as agreed_step found it when it was called last (else read again); returns its
  /// manifest, `path` naming the region. Throws CheckpointError when the step is gone or does not
  /// load.
  CheckpointInfo load(StateDict& target, int64_t step, bool allow_partial_load,
                      bool all_or_nothing) const;

  /// Removes this rank's regions.
  void release() { slots_.release(); }

 private:
  MemoryTierOptions options_;
  std::string job_;
  ProcessGroupPtr group_;
  int rank_;
  int world_;
  int coordinator_;
  std::string run_token_;
  MemorySlots slots_;
  // The steps agreed_step found complete (their CRCs checked), for the load that follows.
  mutable std::vector<MemoryStep> verified_;
};

}  // namespace dcpp::detail
