#pragma once
// Where a checkpoint's bytes come from: DCP's `StorageReader`.

#include <dcpp/core/export.h>
#include <dcpp/format/metadata.h>
#include <dcpp/planner/load_planner.h>
#include <dcpp/planner/plan.h>

#include <vector>

namespace dcpp {

/// One load, on every rank: read_metadata, set_up, prepare_local_plan, [prepare_global_plan on
/// the coordinator], read_data. Implementations throw CheckpointError naming the file and key.
class DCPP_API StorageReader {
 public:
  virtual ~StorageReader() = default;
  /// Throws CheckpointError when there is no complete checkpoint (no `.metadata`).
  virtual Metadata read_metadata() = 0;
  /// `metadata` must outlive the following `read_data`.
  virtual void set_up(const Metadata& metadata, int rank, bool is_coordinator) = 0;
  /// This rank's plan, as the planner made it, before it goes to the coordinator. The default
  /// returns it unchanged.
  virtual LoadPlan prepare_local_plan(LoadPlan plan);
  /// Every rank's plan after the planner's global step (plans[i] belongs to rank i), and after a
  /// read-once load moved the items several ranks read alike into one rank's plan
  /// (LoadOptions::read_once). The default returns them unchanged. A reader that rewrites items
  /// must hand the planner each item it was given whole: a rank that reads for others sends the
  /// boxes it was handed.
  virtual std::vector<LoadPlan> prepare_global_plan(std::vector<LoadPlan> plans);
  /// Reads every item of `plan`: tensor boxes into `planner.resolve_tensor(item)` followed by
  /// `commit_tensor`, values into `load_bytes`. Blocks until done.
  virtual void read_data(const LoadPlan& plan, LoadPlanner& planner) = 0;
  /// Whether this reader's bytes come from storage that the ranks share over a network (a network
  /// file system, an object store), where a byte read by one rank and sent to the others costs
  /// less than every rank reading it: load()'s LoadOptions::read_once = kAuto asks the
  /// coordinator's reader. The default: false.
  virtual bool is_shared_storage() const;
};

}  // namespace dcpp
