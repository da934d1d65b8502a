#pragma once
// Writing a checkpoint directory: DCP's `FileSystemWriter`.

#include <dcpp/core/export.h>
#include <dcpp/storage/storage_writer.h>

#include <filesystem>
#include <memory>
#include <vector>

namespace dcpp {

/// How data items are stored. kZstd is DCP's `stream.zstd/1` transform (PyTorch 2.14's
/// `FileSystemWriter(_extensions=[ZStandard()])`): each item's torch.save archive in one zstd
/// frame, which PyTorch 2.14's `dcp.load` reads when python-zstandard or pyzstd is installed;
/// older PyTorch cannot read such checkpoints.
enum class Compression { kNone, kZstd };

struct DCPP_API FileSystemWriterOptions {
  /// Threads writing this rank's files; each writes its own file `__<rank>_<n>.distcp`.
  int thread_count = 1;
  /// One file per rank (per writer thread), or one file per item.
  bool single_file_per_rank = true;
  /// fsync data files, `.metadata` and the directory. Off only for scratch checkpoints.
  bool sync_files = true;
  /// Allow saving into a directory that already holds a checkpoint. The old checkpoint stays
  /// intact and loadable until the new `.metadata` replaces it; its data files are removed after.
  /// When false, such a save is refused with a CheckpointError.
  bool overwrite = false;
  /// Write dcpp's checksum file `.checksums` beside `.metadata`: the CRC-32 of `.metadata` and of
  /// every item's bytes, computed as they are written, with which loads and `dcpp verify` find any
  /// damaged byte (docs/format.md). Python's DCP ignores the file.
  bool checksum_file = true;
  /// Compress every item (kZstd), at `compression_level` (zstd's levels, 1 to 19; 3 is zstd's
  /// default: fast, and most of the gain). The checksum file's CRC-32s cover the stored,
  /// compressed bytes; each frame also carries zstd's own content checksum.
  Compression compression = Compression::kNone;
  int compression_level = 3;

  FileSystemWriterOptions& with_thread_count(int n) {
    thread_count = n;
    return *this;
  }
  FileSystemWriterOptions& with_single_file_per_rank(bool v) {
    single_file_per_rank = v;
    return *this;
  }
  FileSystemWriterOptions& with_sync_files(bool v) {
    sync_files = v;
    return *this;
  }
  FileSystemWriterOptions& with_overwrite(bool v) {
    overwrite = v;
    return *this;
  }
  FileSystemWriterOptions& with_checksum_file(bool v) {
    checksum_file = v;
    return *this;
  }
  FileSystemWriterOptions& with_compression(Compression c, int level = 3) {
    compression = c;
    compression_level = level;
    return *this;
  }
};

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
