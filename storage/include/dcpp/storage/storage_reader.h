#pragma once
// Where a checkpoint's bytes come from: DCP's `StorageReader`.

#include <dcpp/core/export.h>
#include <dcpp/format/metadata.h>
#include <dcpp/format/metadata_selection.h>
#include <dcpp/planner/load_planner.h>
#include <dcpp/planner/plan.h>

#include <optional>
#include <string>
#include <vector>

namespace dcpp {

/// One load, on every rank: read_metadata, set_up, prepare_local_plan, [prepare_global_plan on
/// the coordinator], read_data. Implementations throw CheckpointError naming the file and key.
class DCPP_API StorageReader {
 public:
  virtual ~StorageReader() = default;
  /// Throws CheckpointError when there is no complete checkpoint (no `.metadata`).
  virtual Metadata read_metadata() = 0;
  /// Called before read_metadata on a rank whose load reads only the chunks `selection` names:
  /// the next read_metadata may leave out the other chunks of the keys it names and their
  /// storage entries (MetadataSelection), so that a rank of a large job does not hold every
  /// rank's chunks. load() calls it on the ranks other than the coordinator when the default
  /// planner plans the load and nothing is read once. The default ignores it; dcpp's file system
  /// reader uses it.
  virtual void narrow_metadata(const MetadataSelection& selection);
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

  /// After read_metadata, on the coordinator: what it read (the metadata and whatever came with
  /// it, such as dcpp's checksum file), as bytes that a reader of the same location on another
  /// rank adopts with read_shared_metadata instead of reading them itself; nullopt when this
  /// reader has nothing to share (the default). load() shares it when the reader
  /// is_shared_storage(), so an object store serves `.metadata` once per load, not once per rank.
  virtual std::optional<std::string> metadata_to_share();
  /// Instead of read_metadata: adopts what another rank's reader of the same location shared.
  /// The default throws CheckpointError (kUsage): a reader that shares must adopt.
  virtual Metadata read_shared_metadata(const std::string& shared);
};

}  // namespace dcpp
