#pragma once
// Megatron-Core's dist_checkpointing in C++ (docs/megatron.md): its functions that read a
// checkpoint's common state, content metadata and metadata; with its load (megatron_load.h) and
// its parts of a state dict (megatron_state_dict.h), which a save writes as Megatron does
// (megatron_storage.h).

#include <dcpp/checkpoint/megatron_load.h>
#include <dcpp/checkpoint/megatron_state_dict.h>
#include <dcpp/core/export.h>
#include <dcpp/state_dict/state_dict.h>

#include <c10/core/ScalarType.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace dcpp::megatron {

/// Megatron-Core's `load_common_state_dict(checkpoint_dir)`: the common (not sharded) state of the
/// Megatron-Core checkpoint in `directory`, as rank 0 saved it: the ShardedObject `common_state`
/// (Megatron-Core since July 2026), else the legacy `common.pt`. Its values as load reads them
/// (numpy arrays and Megatron's `args` Namespace as PythonObjects, python_object.h). One process,
/// no collective. Throws CheckpointError: kUsage when `directory` is not a Megatron-Core
/// checkpoint (no `metadata.json`), kNotFound when it has no common state, kCorrupt when the state
/// is not a dict, and what reading the checkpoint throws.
DCPP_API StateDict load_common_state_dict(const std::filesystem::path& directory);

/// Megatron-Core's `load_content_metadata(checkpoint_dir)`: the `content_metadata` given to its
/// `save`, kept in the common state; empty when it has none.
DCPP_API StateDict load_content_metadata(const std::filesystem::path& directory);

/// A ShardedTensor of a checkpoint without its data, as Megatron-Core's metadata functions list
/// it: its key, dtype and global shape.
struct DCPP_API TensorMetadata {
  std::string key;
  at::ScalarType dtype = at::kFloat;
  std::vector<int64_t> global_shape;
};

/// Megatron-Core's `load_tensors_metadata(checkpoint_dir)`: every ShardedTensor of the checkpoint
/// in `directory`, by key. One process, no collective; throws as load_common_state_dict.
DCPP_API std::map<std::string, TensorMetadata> load_tensors_metadata(
    const std::filesystem::path& directory);

/// What Megatron-Core's `load_sharded_metadata` lists: every ShardedTensor, by key, and every
/// ShardedObject shard (the common state's too), by its unique key.
struct DCPP_API ShardedMetadata {
  std::map<std::string, TensorMetadata> tensors;
  std::map<std::string, ShardedObjectMetadata> objects;
};

/// Megatron-Core's `load_sharded_metadata(checkpoint_dir)`. One process, no collective; throws as
/// load_common_state_dict, and CheckpointError (kCorrupt) naming an object item whose key does not
/// parse (parse_sharded_object_key).
DCPP_API ShardedMetadata load_sharded_metadata(const std::filesystem::path& directory);

/// Megatron-Core's `load_plain_tensors(checkpoint_dir)`: every ShardedTensor of the checkpoint,
/// whole, on this process, by key (not the common state). Throws as load_common_state_dict.
DCPP_API StateDict load_plain_tensors(const std::filesystem::path& directory);

/// Megatron-Core's `remove_sharded_tensors(checkpoint_dir, key_prefix)`: the checkpoint in
/// `directory` without the items whose key starts with `key_prefix` (Megatron's match: the key's
/// first characters), as a new checkpoint committed in its place. The other items are read (into
/// memory: `dcpp convert --drop` streams them into a new directory instead) and saved again under
/// new file names; the old files stay, untouched and loadable, until the new `.metadata` replaces
/// the old, and go after (FileSystemWriter's overwrite protocol). `integrity.json` is written again
/// when there was one; a legacy `common.pt`'s state is saved as `common_state` too. Tensors keep
/// their bits, values what they hold. One process. Returns the removed keys. Throws
/// CheckpointError: kNotFound when no key starts with `key_prefix` (Megatron warns and does
/// nothing), kUsage when the common state would go, and what load and save throw.
DCPP_API std::vector<std::string> remove_sharded_tensors(const std::filesystem::path& directory,
                                                         const std::string& key_prefix);

}  // namespace dcpp::megatron
