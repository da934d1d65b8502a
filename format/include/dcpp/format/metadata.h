#pragma once
// The checkpoint's table of contents: DCP's `torch.distributed.checkpoint.metadata` classes.
// The `.metadata` file is a pickle of `Metadata`; see docs/format.md.

#include <dcpp/core/export.h>
#include <dcpp/state_dict/flatten.h>

#include <c10/core/Layout.h>
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <variant>
#include <vector>

namespace dcpp {

/// One saved box of a tensor, in global coordinates.
struct DCPP_API ChunkStorageMetadata {
  std::vector<int64_t> offsets;
  std::vector<int64_t> sizes;
  bool operator==(const ChunkStorageMetadata& o) const {
    return offsets == o.offsets && sizes == o.sizes;
  }
};

/// DCP's `_MEM_FORMAT_ENCODING`.
enum class MemoryFormatEncoding : int64_t { kContiguous = 0, kChannelsLast = 1, kPreserve = 2 };

struct DCPP_API TensorProperties {
  at::ScalarType dtype = at::kFloat;
  at::Layout layout = at::kStrided;
  bool requires_grad = false;
  MemoryFormatEncoding memory_format = MemoryFormatEncoding::kContiguous;
  bool pin_memory = false;
};

struct DCPP_API TensorStorageMetadata {
  TensorProperties properties;
  std::vector<int64_t> size;  // global shape
  std::vector<ChunkStorageMetadata> chunks;
};

/// A non-tensor value, saved as `torch.save` of the object.
struct DCPP_API BytesStorageMetadata {};

using StorageMetadata = std::variant<TensorStorageMetadata, BytesStorageMetadata>;

/// Names one saved item: a tensor chunk (`offset` set) or a bytes value. `index` is only a hint
/// (the position of the chunk in `TensorStorageMetadata::chunks`) and takes no part in equality.
struct DCPP_API MetadataIndex {
  std::string fqn;
  std::optional<std::vector<int64_t>> offset;
  std::optional<int64_t> index;

  bool operator==(const MetadataIndex& o) const { return fqn == o.fqn && offset == o.offset; }
  bool operator<(const MetadataIndex& o) const {
    return std::tie(fqn, offset) < std::tie(o.fqn, o.offset);
  }
};

/// Where an item's bytes lie: `[offset, offset + length)` of `relative_path` in the checkpoint.
struct DCPP_API StorageInfo {
  std::string relative_path;
  int64_t offset = 0;
  int64_t length = 0;
  /// Stream transforms applied on save, outermost first: ["stream.zstd/1"] for a zstd-compressed
  /// item (FileSystemWriterOptions::compression), which dcpp writes and reads; empty otherwise.
  std::vector<std::string> transform_descriptors;
};

/// DCP's `StorageMeta`: who wrote the checkpoint.
struct DCPP_API StorageMeta {
  std::optional<std::string> checkpoint_id;
  std::string save_id;
  std::string load_id;
  std::vector<std::string> modules;
};

/// Keyed maps keep DCP's insertion order, which is the order Python shows them in.
template <typename Value>
using OrderedEntries = std::vector<std::pair<std::string, Value>>;

struct DCPP_API Metadata {
  OrderedEntries<StorageMetadata> state_dict_metadata;
  /// flat key -> object path, for keys that must be un-flattened (FQNs hold dots).
  OrderedEntries<ObjectPath> planner_data;
  std::vector<std::pair<MetadataIndex, StorageInfo>> storage_data;
  std::optional<StorageMeta> storage_meta;
  /// "1.0.0" from PyTorch 2.8; absent before.
  std::optional<std::string> version;
  /// Megatron-Core's `mcore_data[key]['nd_reformulated_orig_global_shape']` (v0.14 and later, on
  /// a `.metadata` Megatron wrote): the global shape of a ShardedTensor saved with a
  /// `flattened_range` before its `torch_dist` save reformulated it (`[2, 1, 64]` on disk for a
  /// `[16, 8]` tensor), by key. Read, not written.
  OrderedEntries<std::vector<int64_t>> nd_reformulated_shapes;
};

/// The name PyTorch gives a dtype, as `.metadata` spells it: "float32", "bfloat16", "complex64".
/// Throws CheckpointError for dtypes Python cannot name (quantized types).
DCPP_API std::string dtype_name(at::ScalarType dtype);

}  // namespace dcpp
