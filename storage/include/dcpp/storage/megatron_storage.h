#pragma once
// Writing Megatron-Core's `torch_dist` checkpoints (docs/megatron.md): DCP's files, then
// `metadata.json`, Megatron's commit, and when asked `integrity.json`. Reading them needs nothing
// of this header: their layout ("megatron-core", checkpoint_layout.h) is found from their files.

#include <dcpp/core/export.h>
#include <dcpp/storage/filesystem_writer_options.h>
#include <dcpp/storage/storage_writer.h>

#include <filesystem>
#include <memory>

namespace dcpp {

/// Megatron-Core's commit: a directory is a checkpoint of Megatron's once it has this file
/// (`check_is_distributed_checkpoint`).
inline constexpr const char* kMegatronConfigFile = "metadata.json";
/// The key of Megatron-Core's common state: the one shard of its ShardedObject "common_state",
/// whose payload is `[common_state]` (megatron.h).
inline constexpr const char* kMegatronCommonStateKey = "common_state/shard_0_1";
/// Where Megatron-Core before July 2026 kept its common state: `torch.save` of the dict, rank 0's.
inline constexpr const char* kMegatronLegacyCommonFile = "common.pt";
/// What Megatron-Core's `save(..., verify_integrity=True)` writes after its commit.
inline constexpr const char* kMegatronIntegrityFile = "integrity.json";

struct DCPP_API MegatronWriterOptions {
  /// How DCP's files are written and committed (FileSystemWriter's options).
  FileSystemWriterOptions file_system;
  /// Megatron-Core's `verify_integrity=True`: once the checkpoint is committed, the coordinator
  /// writes `integrity.json`, the SHA-256 of every other file in the directory, which dcpp's
  /// loads and `dcpp verify` check, and Megatron's `load(..., verify_integrity=True)`. Costs one
  /// more read of every file, on the coordinator.
  bool integrity_file = false;
  /// Megatron-Core's `validate_access_integrity=True` (its default), for what dcpp's save does
  /// not check already (that each tensor's chunks tile it once, and that replicas agree): every
  /// value item is a ShardedObject shard (Megatron's loads read every value item's key as one), and
  /// each ShardedObject's shards make its whole grid, every shard once. A save that breaks either
  /// is refused on every rank before anything is written (CheckpointError kUsage, naming the key).
  bool validate_access_integrity = true;

  MegatronWriterOptions& with_file_system(FileSystemWriterOptions value) {
    file_system = std::move(value);
    return *this;
  }
  MegatronWriterOptions& with_integrity_file(bool value) {
    integrity_file = value;
    return *this;
  }
  MegatronWriterOptions& with_validate_access_integrity(bool value) {
    validate_access_integrity = value;
    return *this;
  }
};

/// The writer of a Megatron-Core `torch_dist` checkpoint in `directory`, which Megatron-Core's
/// `dist_checkpointing.load` reads: DCP's files, written and committed as FileSystemWriter does
/// (`.metadata` last of them), then, on the coordinator, `metadata.json` (Megatron's bytes:
/// {"sharded_backend": "torch_dist", "sharded_backend_version": 1}), written through a temporary
/// file and renamed, and with MegatronWriterOptions::integrity_file `integrity.json`. A save that
/// replaces a checkpoint removes its `integrity.json` before committing (a failed save leaves the
/// old checkpoint loadable, without it). The state dict saved must hold Megatron's common state,
/// as Megatron-Core's `save` writes it (dcpp::megatron::add_common_state, on one rank; Megatron's
/// `load` reads it first): the save is refused without it (CheckpointError kUsage, on every rank,
/// before anything is written). Saving without collectives is refused too: Megatron commits all
/// ranks' files at once. `save(state_dict, Location(dir).with_layout(kMegatronLayout))` writes
/// with this writer's default options.
DCPP_API std::unique_ptr<StorageWriter> make_megatron_writer(std::filesystem::path directory,
                                                             MegatronWriterOptions options = {});

}  // namespace dcpp
