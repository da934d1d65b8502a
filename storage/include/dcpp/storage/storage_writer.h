#pragma once
// Where a checkpoint's bytes go: DCP's `StorageWriter`.

#include <dcpp/core/export.h>
#include <dcpp/format/metadata.h>
#include <dcpp/planner/plan.h>
#include <dcpp/planner/save_planner.h>

#include <vector>

namespace dcpp {

/// One save, on every rank: set_up, prepare_local_plan, [prepare_global_plan on the coordinator],
/// write_data, then [finish on the coordinator, after every rank's write_data returned]. Without
/// collectives, every rank calls all of them itself: set_up_without_collectives,
/// prepare_local_plan, prepare_global_plan, write_data, finish. When the save fails, on this rank
/// or another, every rank's writer gets `abort_save` instead of (or after a failed) `finish`. A
/// writer is reused for later saves only after `finish` or a failure. Implementations throw
/// CheckpointError.
class DCPP_API StorageWriter {
 public:
  virtual ~StorageWriter() = default;
  virtual void set_up(int rank, bool is_coordinator) = 0;
  /// Called instead of `set_up` by a save without collectives (SaveOptions::use_collectives =
  /// false, DCP's `use_collectives=False`): this rank saves alone, as rank `rank`; the writer then
  /// gets `prepare_global_plan` with this rank's plan only and `finish` with its results only, and
  /// commits this rank's part under names of its own (`__<rank>.metadata`). The default throws
  /// CheckpointError: a writer must opt in.
  virtual void set_up_without_collectives(int rank);
  /// This rank's plan, as the planner made it, before it goes to the coordinator: a writer may
  /// add its own `storage_data`. The default returns it unchanged.
  virtual SavePlan prepare_local_plan(SavePlan plan);
  /// Sets each rank's `storage_data` (plans[i] belongs to rank i).
  virtual std::vector<SavePlan> prepare_global_plan(std::vector<SavePlan> plans) = 0;
  /// Writes the items of this rank's final plan, getting their data from `planner.resolve_data`.
  /// Blocks until written (and durable, if the writer syncs). Nothing is visible as a checkpoint
  /// until `finish`.
  virtual std::vector<WriteResult> write_data(const SavePlan& plan, SavePlanner& planner) = 0;
  /// Records every rank's results in `metadata.storage_data` and commits the checkpoint. Once this
  /// returns the checkpoint is complete; if it throws, no previous checkpoint was damaged.
  virtual void finish(Metadata metadata, const std::vector<std::vector<WriteResult>>& results) = 0;
  /// Called by save() on every rank when the save fails, wherever it failed (this rank's step or
  /// another rank's, a rank that died, set_up itself), before save() rethrows the failure: the
  /// writer removes what this rank's part of the save wrote that no committed checkpoint refers
  /// to, and gives up what the save holds (the file system writer: its data files and its lock on
  /// the directory). It must leave any previous checkpoint intact, and must expect that the
  /// coordinator's `finish` may have committed before failing (its data files are then the
  /// checkpoint's). Called at most once per save, also when the failure came before this writer's
  /// set_up. An exception it throws is logged and dropped: the caller gets the save's own error.
  /// The default does nothing (a writer that writes nothing before `finish` needs nothing else).
  virtual void abort_save();
};

}  // namespace dcpp
