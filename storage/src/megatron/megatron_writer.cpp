#include "megatron/megatron_writer.h"

#include "core/durable_file.h"
#include "megatron/megatron_json.h"
#include "storage/megatron_integrity.h"
#include "storage/megatron_object_key.h"

#include <dcpp/core/checkpoint_error.h>
#include <dcpp/storage/filesystem_writer.h>
#include <dcpp/storage/megatron_storage.h>

#include <algorithm>
#include <string>
#include <vector>

namespace dcpp::detail {
namespace {

namespace fs = std::filesystem;

// Megatron's validate_access_integrity for what dcpp's save leaves unchecked: every value item of
// `plans` a ShardedObject shard, and each ShardedObject's shards its whole grid, once (an item
// several ranks hold is one item: replicas).
void check_sharded_objects(const std::vector<SavePlan>& plans, const fs::path& directory) {
  const std::string where = directory.string() + ": ";
  std::vector<MegatronObjectKey> shards;
  for (const SavePlan& plan : plans) {
    for (const WriteItem& item : plan.items) {
      if (item.is_tensor()) continue;
      try {
        shards.push_back(parse_megatron_object_key(item.index.fqn));
      } catch (const CheckpointError& e) {
        throw CheckpointError(
            ErrorKind::kUsage,
            where + "the value '" + item.index.fqn +
                "' is neither in Megatron's common state nor a ShardedObject shard, which "
                "Megatron-Core's loads take every value for (" +
                e.what_without_backtrace() +
                "): put it in the common state (dcpp::megatron::add_common_state) or add it with "
                "add_sharded_object");
      }
    }
  }
  check_sharded_object_grids(
      shards, where,
      "add every shard once, or save with MegatronWriterOptions::validate_access_integrity off");
}

}  // namespace

MegatronWriter::MegatronWriter(std::unique_ptr<StorageWriter> dcp_files, fs::path directory,
                               bool integrity_file, bool validate_access_integrity, bool sync_files)
    : dcp_files_(std::move(dcp_files)),
      directory_(std::move(directory)),
      integrity_file_(integrity_file),
      validate_access_integrity_(validate_access_integrity),
      sync_files_(sync_files) {}

void MegatronWriter::set_up(int rank, bool is_coordinator) {
  dcp_files_->set_up(rank, is_coordinator);
}

void MegatronWriter::set_up_without_collectives(int) {
  throw CheckpointError(ErrorKind::kUsage,
                        directory_.string() +
                            ": a Megatron-Core checkpoint is committed for every rank at once "
                            "(its metadata.json): save it with collectives");
}

SavePlan MegatronWriter::prepare_local_plan(SavePlan plan) {
  return dcp_files_->prepare_local_plan(std::move(plan));
}

std::vector<SavePlan> MegatronWriter::prepare_global_plan(std::vector<SavePlan> plans) {
  const bool has_common_state = std::any_of(plans.begin(), plans.end(), [](const SavePlan& plan) {
    return std::any_of(plan.items.begin(), plan.items.end(), [](const WriteItem& item) {
      return !item.is_tensor() && item.index.fqn == kMegatronCommonStateKey;
    });
  });
  if (!has_common_state) {
    throw CheckpointError(
        ErrorKind::kUsage,
        directory_.string() + ": the state dict has no '" + kMegatronCommonStateKey +
            "', the common state Megatron-Core's load reads first: add it with "
            "dcpp::megatron::add_common_state (<dcpp/checkpoint/megatron_state_dict.h>) on rank 0, "
            "or on every rank alike");
  }
  if (validate_access_integrity_) check_sharded_objects(plans, directory_);
  return dcp_files_->prepare_global_plan(std::move(plans));
}

std::vector<WriteResult> MegatronWriter::write_data(const SavePlan& plan, SavePlanner& planner) {
  return dcp_files_->write_data(plan, planner);
}

void MegatronWriter::finish(Metadata metadata,
                            const std::vector<std::vector<WriteResult>>& results) {
  // A replaced checkpoint's digests would not match the new files: gone before the commit.
  const fs::path integrity = directory_ / kMegatronIntegrityFile;
  std::error_code error;
  if (fs::remove(integrity, error) && sync_files_) sync_directory(directory_);
  dcp_files_->finish(std::move(metadata), results);
  write_file_durably(directory_ / kMegatronConfigFile, kMegatronConfigText, sync_files_);
  if (integrity_file_) write_integrity_file(directory_, sync_files_);
}

void MegatronWriter::abort_save() { dcp_files_->abort_save(); }

}  // namespace dcpp::detail

namespace dcpp {

std::unique_ptr<StorageWriter> make_megatron_writer(std::filesystem::path directory,
                                                    MegatronWriterOptions options) {
  auto dcp_files = std::make_unique<FileSystemWriter>(directory, options.file_system);
  return std::make_unique<detail::MegatronWriter>(
      std::move(dcp_files), std::move(directory), options.integrity_file,
      options.validate_access_integrity, options.file_system.sync_files);
}

}  // namespace dcpp
