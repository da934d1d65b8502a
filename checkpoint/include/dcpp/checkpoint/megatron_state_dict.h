#pragma once
// Megatron-Core's parts of a state dict that are not tensors (docs/megatron.md, "Writing"): its
// ShardedObjects, each shard under its unique key `<key>/shard_<offsets>_<shape>`, and its common
// state, the ShardedObject "common_state". Keys made and read as Megatron-Core's `ShardedObject`
// does.

#include <dcpp/core/export.h>
#include <dcpp/state_dict/state_dict.h>

#include <ATen/core/ivalue.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace dcpp::megatron {

/// The key of the common state under which Megatron-Core keeps `save`'s `content_metadata`.
inline constexpr const char* kContentMetadataEntry = "content_metadata";

/// One shard of a ShardedObject, as Megatron-Core's `ShardedObject.empty_from_unique_key` reads
/// it from its unique key.
struct DCPP_API ShardedObjectMetadata {
  std::string key;
  /// The grid of shards; a legacy key one dimension short of its offset ends in -1, as Megatron
  /// reads it.
  std::vector<int64_t> global_shape;
  std::vector<int64_t> global_offset;
  std::string unique_key;
};

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
/// writes rank 0's: add it on rank 0, or on every rank alike (saved once; ranks whose common states
/// differ fail the save, naming it: SaveOptions::replica_check). load_common_state_dict reads it
/// back. Throws
/// CheckpointError (kUsage) when `state_dict` has it already, or when `common` holds a
/// ShardedTensor or a Stateful (naming its key).
DCPP_API void add_common_state(StateDict& state_dict, StateDict common,
                               const StateDict& content_metadata = {});

/// Megatron-Core's check, in its save, that the common state agrees across ranks
/// (`_validate_common_state_dict`, after its `preprocess_common_before_consistancy_check` hook):
/// each rank's `common`, passed through `preprocess` when given (to drop what may differ from
/// rank to rank), compared with rank 0's by a CRC-32 of its contents. Returns, on every rank, the
/// ranks whose state differs from rank 0's (empty when they agree) and, as Megatron, logs a
/// warning naming them. Collective over `group` (null: one process, which always agrees). For a
/// save that must fail instead, add the common state on every rank (the replica check).
DCPP_API std::vector<int> common_state_disagreements(
    const StateDict& common, const c10::intrusive_ptr<c10d::ProcessGroup>& group,
    const std::function<StateDict(const StateDict&)>& preprocess = {});

/// Reads a ShardedObject shard's unique key as Megatron-Core does: exactly one "/", then "shard",
/// the offsets and the shape, each joined by "." and separated by "_". Throws CheckpointError
/// (kCorrupt) naming the key when it does not parse.
DCPP_API ShardedObjectMetadata parse_sharded_object_key(const std::string& unique_key);

}  // namespace dcpp::megatron
