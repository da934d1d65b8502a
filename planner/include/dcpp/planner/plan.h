#pragma once
// What a rank will write or read: DCP's plan records (`planner.py`). Plain aggregates.

#include <dcpp/core/export.h>
#include <dcpp/format/metadata.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace dcpp {

/// DCP's `WriteItemType`: a whole tensor, one shard of a sharded tensor, or a non-tensor value.
enum class WriteItemType { kTensor, kShard, kBytes };

struct DCPP_API TensorWriteData {
  ChunkStorageMetadata chunk;  // the box this item holds, in global coordinates
  TensorProperties properties;
  std::vector<int64_t> size;  // the global shape
};

/// One item to write: a tensor chunk (`tensor_data` set) or a bytes value.
struct DCPP_API WriteItem {
  MetadataIndex index;
  WriteItemType type = WriteItemType::kBytes;
  std::optional<TensorWriteData> tensor_data;

  bool is_tensor() const { return type != WriteItemType::kBytes; }
  /// Bytes the item's tensor data occupies (0 for bytes items, whose size is unknown until
  /// written).
  int64_t tensor_storage_size() const;
};

struct DCPP_API SavePlan {
  std::vector<WriteItem> items;
  /// flat key -> object path of every key this rank flattened; merged into Metadata::planner_data.
  OrderedEntries<ObjectPath> planner_data;
  /// Set by the storage writer's global planning for this rank (the file system writer puts the
  /// file name prefix "__<rank>_" here); opaque to everything else.
  std::string storage_data;
};

/// Where a written item landed.
struct DCPP_API WriteResult {
  MetadataIndex index;
  int64_t size_in_bytes = 0;
  StorageInfo storage_data;
  /// The CRC-32 of the item's bytes, when the storage writer computed one (the file system writer
  /// does, for its checksum file). Not part of DCP's metadata.
  std::optional<uint32_t> crc32;
  /// A CRC-32 of what the item holds (a tensor's dtype, shape and row-major elements), when the
  /// storage writer computed it as it wrote (dcpp's DCP writers do for tensors): the replica check
  /// (SaveOptions::replica_check) then does not read the item again. Stays on this rank.
  std::optional<uint32_t> content_crc32;
};

enum class LoadItemType { kTensor, kBytes };

/// Copy the box `[storage_offsets, storage_offsets + lengths)` of saved chunk `storage_index`
/// into the box `[dest_offsets, dest_offsets + lengths)` of destination `dest_index`. Offsets are
/// relative to each chunk's own origin. Bytes items carry no offsets.
struct DCPP_API ReadItem {
  LoadItemType type = LoadItemType::kBytes;
  MetadataIndex dest_index;
  std::vector<int64_t> dest_offsets;
  MetadataIndex storage_index;
  std::vector<int64_t> storage_offsets;
  std::vector<int64_t> lengths;
};

struct DCPP_API LoadPlan {
  std::vector<ReadItem> items;
  /// Set by the storage reader's prepare_local_plan / prepare_global_plan, if it wants; opaque to
  /// everything else.
  std::string storage_data;
};

}  // namespace dcpp
