#pragma once
// Megatron-Core's `torch_dist` checkpoints as a layout ("megatron-core"): DCP's layout, whose
// `.metadata` carries Megatron's additions, with `metadata.json` beside it, which Megatron writes
// last, as its commit (check_is_distributed_checkpoint). Directories only, for now.

#include <dcpp/storage/checkpoint_layout.h>

#include <filesystem>

namespace dcpp::detail {

class MegatronCheckpointLayout final : public CheckpointLayout {
 public:
  std::string name() const override { return kMegatronLayout; }
  /// A directory with `metadata.json`, unless that file is a JSON object without
  /// "sharded_backend" (another program's file beside a DCP checkpoint).
  bool recognizes(const Location& location, LocationFiles& files) const override;
  /// DCP's reader of the directory, once `metadata.json` names the `torch_dist` backend (version
  /// 1, common backend `torch`) and, when there is an `integrity.json` and `reading` verifies
  /// checksums, every file it lists has its SHA-256 (megatron_integrity.h; each file read once
  /// more, on every rank that loads). Throws CheckpointError naming the file: kNotFound without
  /// `metadata.json`, kCorrupt when it is not such a JSON object or a digest differs,
  /// kIncompatible for another backend or version.
  std::unique_ptr<StorageReader> make_reader(const Location& location,
                                             const FileSystemReaderOptions& reading) const override;
  /// A MegatronWriter (megatron_writer.h) around `dcp_files`, without `integrity.json`
  /// (make_megatron_writer writes one). Throws CheckpointError (kUsage) for a location other
  /// than a directory.
  std::unique_ptr<StorageWriter> make_writer(
      const Location& location, std::unique_ptr<StorageWriter> dcp_files) const override;
};

/// Checks `metadata.json` of the Megatron-Core checkpoint in `directory`, as make_reader does.
void check_megatron_config(const std::filesystem::path& directory);

}  // namespace dcpp::detail
