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
/// A save owns its directory: the coordinator's set_up locks `<directory>/.dcpp-save.lock` (an
/// open-file-description lock, which the kernel drops when the holder dies) before any rank
/// writes, and finish or abort_save removes it. A second save into the directory while one is in
/// progress (another process group, process, thread or AsyncCheckpointer) fails in set_up with a
/// CheckpointError (kUsage) naming the directory and the holder (host, pid, since when), which
/// save() reports to every rank of that save before any of them writes. Without collectives each
/// rank locks `.dcpp-save.<rank>.lock`. Where the file system has no such locks (some NFS and
/// FUSE mounts) a warning is logged once and saves are not locked (docs/reliability.md, "Saves
/// into one directory").
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
  /// Removes the files this rank created for the failed save (its data files; on the
  /// coordinator also `.checksums.tmp` and `.metadata.tmp`), never a previous checkpoint's, and
  /// releases the directory's lock. Keeps them when this save's `.metadata` may have been
  /// committed (the coordinator renamed it; on another rank, `.metadata` changed since set_up).
  void abort_save() override;

  const std::filesystem::path& directory() const;
  const FileSystemWriterOptions& options() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace dcpp
