#pragma once
// Reading a checkpoint directory: DCP's `FileSystemReader`.

#include <dcpp/core/export.h>
#include <dcpp/storage/filesystem_reader_options.h>
#include <dcpp/storage/storage_reader.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>

namespace dcpp {

/// DCP's `FileSystemReader`: reads DCP's directory layout. Paths in `.metadata` must name files
/// inside `directory` (no "..", no absolute paths): anything else is a CheckpointError. Reads
/// every item format PyTorch 2.14 writes: `torch.save` archives, archives in zstd frames
/// (`stream.zstd/1`), and the SAFETENSORS serialization format's blobs (docs/format.md). A
/// directory without `.metadata` but with `__<rank>.metadata` files (saved without collectives)
/// reads as the merge of those files, checked against their `__<rank>.checksums` (docs/format.md).
/// Throws CheckpointError (kUsage) on bad options.
///
/// Subclass it as in Python: override a step (prepare_local_plan, prepare_global_plan,
/// read_data, ...) and call this class's version from yours.
class DCPP_API FileSystemReader : public StorageReader {
 public:
  explicit FileSystemReader(std::filesystem::path directory, FileSystemReaderOptions options = {});
  ~FileSystemReader() override;
  FileSystemReader(const FileSystemReader&) = delete;
  FileSystemReader& operator=(const FileSystemReader&) = delete;

  Metadata read_metadata() override;
  /// The next read_metadata of `.metadata` keeps only what `selection` asks for (per-rank
  /// metadata files are read whole).
  void narrow_metadata(const MetadataSelection& selection) override;
  void set_up(const Metadata& metadata, int rank, bool is_coordinator) override;
  void read_data(const LoadPlan& plan, LoadPlanner& planner) override;
  /// True when the directory lies on a network file system (NFS, SMB, Lustre, GPFS, CephFS,
  /// BeeGFS, GlusterFS or another FUSE file system, 9p, AFS), as statfs() reports it.
  bool is_shared_storage() const override;

  /// The bytes read_data has read from data files since this reader was made: what storage
  /// served, the archives' headers and whole small items included.
  uint64_t bytes_read() const;
  const std::filesystem::path& directory() const;
  const FileSystemReaderOptions& options() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace dcpp
