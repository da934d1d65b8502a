#pragma once
// Megatron-Core's ShardedObject shard keys, `<key>/shard_<offsets>_<shape>`, read as its
// `ShardedObject.empty_from_unique_key` reads them: by the Megatron writer's checks and by
// dcpp::megatron::parse_sharded_object_key (megatron_state_dict.h).

#include <cstdint>
#include <string>
#include <vector>

namespace dcpp::detail {

struct MegatronObjectKey {
  std::string key;
  /// A legacy key one dimension short of its offset ends in -1, as Megatron reads it.
  std::vector<int64_t> global_shape;
  std::vector<int64_t> global_offset;
};

/// `unique_key` read: exactly one "/", then "shard", the offsets and the shape, each joined by "."
/// and separated by "_". Throws CheckpointError (kCorrupt) naming the key and what is wrong when it
/// does not parse.
MegatronObjectKey parse_megatron_object_key(const std::string& unique_key);

/// Megatron's validate_access_integrity for ShardedObjects: the shards every rank saves or loads
/// (a shard listed more than once is one, with replicas) make each ShardedObject's whole grid, each
/// shard once, and agree on its shape. Throws CheckpointError (kUsage) that starts with `where`,
/// names the object and the shard that is missing or out of place, and ends with `remedy`. A
/// legacy key's shape (ending in -1) is not checked.
void check_sharded_object_grids(const std::vector<MegatronObjectKey>& shards,
                                const std::string& where, const std::string& remedy);

}  // namespace dcpp::detail
