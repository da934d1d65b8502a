#pragma once
// A memory step's payload (the layout in <dcpp/storage/memory_step.h>), decoded, and the checked
// lookups of its items: what the writer, the reader and the checkpoint writer of memory steps
// share.

#include <dcpp/format/metadata.h>

#include <string>
#include <string_view>

namespace dcpp::detail {

/// The data file name a rank's memory step gives its items: `__<rank>_memory`.
std::string memory_data_file(int rank);

/// A payload, decoded: views into its bytes (which must outlive it) and the decoded Metadata.
struct MemoryPayload {
  int rank = 0;
  int world_size = 0;
  std::string_view manifest;
  Metadata metadata;
  std::string_view data;
};

/// Decodes a payload; `where` (a region name) names it in errors. Throws CheckpointError
/// (kCorrupt) naming `where` when the preamble, the sizes or the metadata do not hold together.
MemoryPayload decode_memory_payload(std::string_view bytes, const std::string& where);

/// Throws CheckpointError (kCorrupt) naming the memory step `where` and saying `what`.
[[noreturn]] void memory_step_corrupt(const std::string& where, const std::string& what);

/// A tensor chunk of a payload: its entry, its chunk, and its bytes in the payload's data.
struct MemoryChunk {
  const TensorStorageMetadata* tensor = nullptr;
  const ChunkStorageMetadata* chunk = nullptr;
  std::string_view bytes;
};

/// The chunk `index` names in `metadata`, whose items lie in `payload`'s data as `info` says.
/// Throws CheckpointError (kCorrupt) naming `where` when `metadata` has no such chunk, or its
/// bytes are not where and as long as its shape and dtype say.
MemoryChunk memory_chunk(const Metadata& metadata, const MetadataIndex& index,
                         const StorageInfo& info, const MemoryPayload& payload,
                         const std::string& where);

/// A value item's bytes (a `torch.save` archive) in `payload`'s data as `info` says; throws
/// CheckpointError (kCorrupt) naming `where` and `key` when they lie outside it.
std::string_view memory_value_bytes(const StorageInfo& info, const MemoryPayload& payload,
                                    const std::string& key, const std::string& where);

}  // namespace dcpp::detail
