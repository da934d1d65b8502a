#pragma once
// Megatron-Core's dist_checkpointing in C++ (docs/megatron.md): reading a checkpoint's non-sharded
// parts (its common state and the content metadata saved with it), and putting them, with
// ShardedObjects, into a state dict that a save writes as Megatron does (megatron_storage.h).

#include <dcpp/core/export.h>
#include <dcpp/state_dict/state_dict.h>

#include <ATen/core/ivalue.h>

#include <cstdint>
#include <filesystem>
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

/// The key under which Megatron-Core's ShardedObject `key` stores its shard at `global_offset` of
/// a grid of `global_shape` shards (`ShardedObject.unique_key`): "<key>/shard_<offsets>_<shape>",
/// each joined by "." ("rng_state/shard_0.1_1.2": offset (0, 1) of (1, 2)). Throws
/// CheckpointError (kUsage) when the two differ in length, are empty, or the offset is outside
/// the shape.
DCPP_API std::string sharded_object_key(const std::string& key,
                                        const std::vector<int64_t>& global_offset,
                                        const std::vector<int64_t>& global_shape);

/// Adds the shard at `global_offset` of Megatron-Core's ShardedObject `key` to `state_dict`, as
/// Megatron's save writes it: under sharded_object_key, its payload `[data]` saved whole
/// (whole_value.h), whatever `data` holds (tensors, dicts, numpy arrays: python_object.h).
/// Megatron writes each shard's main replica only: add a shard on the one rank that holds it.
/// Throws CheckpointError (kUsage) for a key already in `state_dict`, or what sharded_object_key
/// throws.
DCPP_API void add_sharded_object(StateDict& state_dict, const std::string& key, c10::IValue data,
                                 const std::vector<int64_t>& global_offset,
                                 const std::vector<int64_t>& global_shape);

/// Adds Megatron-Core's common state to `state_dict` as its `save` writes it: `common` (what is
/// neither a ShardedTensor nor a ShardedObject: the iteration, `args`, the scheduler's state...)
/// with `content_metadata`, when not empty, under the key "content_metadata" (Megatron's
/// `save(..., content_metadata=...)`), as the ShardedObject "common_state" of one shard. Megatron
/// writes rank 0's: add it on rank 0 alone. load_common_state_dict reads it back. Throws
/// CheckpointError (kUsage) when `state_dict` has it already, or when `common` holds a
/// ShardedTensor or a Stateful (naming its key).
DCPP_API void add_common_state(StateDict& state_dict, StateDict common,
                               const StateDict& content_metadata = {});

}  // namespace dcpp::megatron
