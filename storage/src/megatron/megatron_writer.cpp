#include "megatron/megatron_writer.h"

#include "core/durable_file.h"
#include "megatron/megatron_json.h"
#include "storage/megatron_integrity.h"

#include <dcpp/core/checkpoint_error.h>
#include <dcpp/storage/filesystem_writer.h>
#include <dcpp/storage/megatron_storage.h>

#include <algorithm>

namespace dcpp::detail {
namespace {

namespace fs = std::filesystem;

}  // namespace

MegatronWriter::MegatronWriter(std::unique_ptr<StorageWriter> dcp_files, fs::path directory,
                               bool integrity_file, bool sync_files)
    : dcp_files_(std::move(dcp_files)),
      directory_(std::move(directory)),
      integrity_file_(integrity_file),
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
            "', the common state Megatron-Core's load reads first: add it on one rank with "
            "dcpp::megatron::add_common_state (<dcpp/checkpoint/megatron.h>)");
  }
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

}  // namespace dcpp::detail

namespace dcpp {

std::unique_ptr<StorageWriter> make_megatron_writer(std::filesystem::path directory,
                                                    MegatronWriterOptions options) {
  auto dcp_files = std::make_unique<FileSystemWriter>(directory, options.file_system);
  return std::make_unique<detail::MegatronWriter>(std::move(dcp_files), std::move(directory),
                                                  options.integrity_file,
                                                  options.file_system.sync_files);
}

}  // namespace dcpp
