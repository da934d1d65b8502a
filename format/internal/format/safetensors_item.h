#pragma once
// DCP's SAFETENSORS serialization format (PyTorch 2.14, `FileSystemWriter(serialization_format=
// SerializationFormat.SAFETENSORS)`): a data file holds its bytes items first, each a raw
// `torch.save` archive as usual, then ONE safetensors blob (safetensors_header.h) holding every
// tensor chunk of the file, keyed by FQN. Every tensor item's `_StorageInfo` points at the start
// of that blob (`offset`) and gives the chunk's bytes as `length` (not the blob's). The blob's
// "__metadata__" holds DCP_SHARDING_INFO (JSON: FQN -> {"saved_offsets": [...]}), DCP_VERSION and
// "format". Items are told apart by their first bytes: a zstd magic number starts a compressed
// item, a plausible header length followed by '{' a safetensors blob; anything else (a zip local
// header, or damaged bytes) is read as a torch.save archive, whose reader says what is wrong.
//
// Reading trusts nothing: the blob's header is bounds-checked (safetensors_header.h) against the
// file, and the tensor it holds for a key must have the dtype, shape and offsets `.metadata` gives
// its chunk, and `length` bytes, before a byte of data is read. Only the bytes of the box asked for
// are read when they are one range (resharding reads part of a chunk).

#include "format/file_io.h"
#include "format/item_codec.h"
#include "format/safetensors_header.h"

#include <dcpp/format/metadata.h>

#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

namespace dcpp::detail {

/// What an item's first bytes say it is.
enum class StoredLayout { kTorchSave, kZstd, kSafetensors };

/// Reads up to 9 bytes at `offset` of `file` (fewer at its end) and classifies them.
StoredLayout sniff_stored_layout(const RandomAccessData& file, uint64_t offset);

/// One safetensors blob of a data file.
struct SafetensorsBlob {
  uint64_t offset = 0;  // where the blob starts in its file
  SafetensorsHeader header;
  /// DCP_SHARDING_INFO's "saved_offsets" by FQN, for the tensors it lists.
  std::map<std::string, std::vector<int64_t>> saved_offsets;
  /// The index in `header.tensors` of each tensor, by name.
  std::unordered_map<std::string, std::size_t> by_name;
  /// One past the blob's last byte of tensor data, in its file.
  uint64_t end() const;
};

/// Reads and checks the header of the blob at `offset` of `file`. Throws CheckpointError naming
/// `where` when it is damaged or lies past the end of the file.
SafetensorsBlob read_safetensors_blob(const RandomAccessData& file, uint64_t offset,
                                      const std::string& where);

/// The blob's entry for the chunk `chunk` of tensor `key`, checked against `.metadata`: present,
/// of `dtype` and the chunk's sizes, of `item_length` bytes, saved at the chunk's offsets when
/// DCP_SHARDING_INFO says where. Throws CheckpointError naming `where`.
const SafetensorsTensor& find_safetensors_chunk(const SafetensorsBlob& blob, const std::string& key,
                                                at::ScalarType dtype,
                                                const ChunkStorageMetadata& chunk,
                                                uint64_t item_length, const std::string& where);

/// Reads the box `request` asks for of `entry`'s data into `request.dest`.
void read_safetensors_chunk(const RandomAccessData& file, const SafetensorsBlob& blob,
                            const SafetensorsTensor& entry, const TensorReadRequest& request,
                            const std::string& where);

}  // namespace dcpp::detail
