#pragma once
// Writing a checkpoint directory: DCP's `FileSystemWriter`.

#include <dcpp/core/export.h>
#include <dcpp/storage/filesystem_writer_options.h>
#include <dcpp/storage/storage_writer.h>

#include <filesystem>
#include <memory>
#include <vector>

namespace dcpp {

/// DCP's `FileSystemWriter`: writes DCP's directory layout. Each rank writes its data files
/// (`__<rank>_<n>.distcp`, or under the prefix a subclass's prepare_local_plan put in the plan's
/// `storage_data`); then the coordinator writes the checksum file (`.checksums.tmp`, fsync, rename
/// to `.checksums`, fsync of the directory), then `.metadata.tmp`, fsync, rename to `.metadata`,
/// fsync of the directory. Creates the directory if needed. Throws CheckpointError (kUsage) on
/// bad options.
///
/// Subclass it as in Python: override a step (prepare_local_plan, prepare_global_plan, write_data,
/// finish, ...) and call this class's version from yours.
class DCPP_API FileSystemWriter : public StorageWriter {
 public:
  explicit FileSystemWriter(std::filesystem::path directory, FileSystemWriterOptions options = {});
  ~FileSystemWriter() override;
  FileSystemWriter(const FileSystemWriter&) = delete;
  FileSystemWriter& operator=(const FileSystemWriter&) = delete;

  void set_up(int rank, bool is_coordinator) override;
  void set_up_without_collectives(int rank) override;
  /// Gives every plan without `storage_data` the file name prefix of its rank (with a random tag
  /// when the directory holds a checkpoint, so that its files stay intact until the commit). A
  /// prefix a subclass set stays: it must name files no existing checkpoint uses.
  std::vector<SavePlan> prepare_global_plan(std::vector<SavePlan> plans) override;
  std::vector<WriteResult> write_data(const SavePlan& plan, SavePlanner& planner) override;
  void finish(Metadata metadata, const std::vector<std::vector<WriteResult>>& results) override;

  const std::filesystem::path& directory() const;
  const FileSystemWriterOptions& options() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace dcpp
