#pragma once
// save() and load(): DCP's `torch.distributed.checkpoint.save` / `load`, single process.

#include <dcpp/checkpoint/filesystem_reader.h>
#include <dcpp/checkpoint/filesystem_writer.h>
#include <dcpp/checkpoint/load_planner.h>
#include <dcpp/checkpoint/metadata.h>
#include <dcpp/checkpoint/save_planner.h>
#include <dcpp/state_dict/state_dict.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace dcpp {

struct SaveOptions {
  /// Used when no storage writer is given.
  FileSystemWriterOptions file_system;
  /// Default: make_default_save_planner().
  std::shared_ptr<SavePlanner> planner;
};

struct LoadOptions {
  /// Used when no storage reader is given.
  FileSystemReaderOptions file_system;
  /// Default: make_default_load_planner(allow_partial_load).
  std::shared_ptr<LoadPlanner> planner;
  /// Load what the checkpoint has and leave the rest untouched, instead of failing on keys the
  /// checkpoint lacks (DCP's `allow_partial_load`).
  bool allow_partial_load = false;
};

/// Saves `state_dict` as a DCP checkpoint in `directory`. Stateful values are saved as their
/// `state_dict()`. Tensors on other devices are copied to the CPU to be written. Blocks until the
/// checkpoint is committed; returns its Metadata. Throws CheckpointError; a failed save never
/// damages a checkpoint already there.
Metadata save(const StateDict& state_dict, const std::filesystem::path& directory,
              const SaveOptions& options = {});
Metadata save(const StateDict& state_dict, StorageWriter& storage_writer,
              const SaveOptions& options = {});

/// Loads a checkpoint into `state_dict` in place: tensors (plain or sharded, any sharding) are
/// filled from the saved chunks, whatever sharding saved them; other values are replaced; Stateful
/// values get `load_state_dict()` with their loaded state. Dtypes and global shapes must match.
/// Throws CheckpointError listing missing keys (unless `allow_partial_load`) and naming the key
/// and file on any mismatch or corruption. Returns the keys found on one side only.
LoadReport load(StateDict& state_dict, const std::filesystem::path& directory,
                const LoadOptions& options = {});
LoadReport load(StateDict& state_dict, StorageReader& storage_reader,
                const LoadOptions& options = {});

/// Loads without a target (DCP's `_load_state_dict_from_keys`): everything, or only the given keys
/// and what lies under them, as a nested state dict of CPU tensors and values.
StateDict load_from_keys(const std::filesystem::path& directory,
                         const std::vector<std::string>& keys = {},
                         const FileSystemReaderOptions& options = {});

/// The Metadata of the checkpoint in `directory`, without reading any data.
Metadata read_metadata(const std::filesystem::path& directory);

}  // namespace dcpp
