#pragma once
// Megatron-Core's files around a writer of DCP's (megatron_storage.h): the common state required
// in the global plan, `metadata.json` after DCP's commit, `integrity.json` when asked.

#include <dcpp/storage/storage_writer.h>

#include <filesystem>
#include <memory>

namespace dcpp::detail {

class MegatronWriter final : public StorageWriter {
 public:
  /// `dcp_files` writes and commits DCP's files in `directory`; the options as
  /// MegatronWriterOptions' (`sync_files`: fsync Megatron's files too).
  MegatronWriter(std::unique_ptr<StorageWriter> dcp_files, std::filesystem::path directory,
                 bool integrity_file, bool validate_access_integrity, bool sync_files);

  void set_up(int rank, bool is_coordinator) override;
  /// Throws CheckpointError (kUsage): one `metadata.json` commits every rank's files.
  void set_up_without_collectives(int rank) override;
  SavePlan prepare_local_plan(SavePlan plan) override;
  /// Throws CheckpointError (kUsage) when no plan writes the common state, and, validating, when
  /// a value item is not a ShardedObject shard or a ShardedObject's shards miss part of its grid.
  std::vector<SavePlan> prepare_global_plan(std::vector<SavePlan> plans) override;
  std::vector<WriteResult> write_data(const SavePlan& plan, SavePlanner& planner) override;
  /// Megatron's files (metadata.json, the integrity file) come after the DCP commit, outside the
  /// directory's save lock, which the DCP files' finish releases.
  void finish(Metadata metadata, const std::vector<std::vector<WriteResult>>& results) override;
  /// The DCP files' abort_save: their data files go, and the lock.
  void abort_save() override;

 private:
  std::unique_ptr<StorageWriter> dcp_files_;
  std::filesystem::path directory_;
  bool integrity_file_;
  bool validate_access_integrity_;
  bool sync_files_;
};

}  // namespace dcpp::detail
