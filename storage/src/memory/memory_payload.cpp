// A memory step's payload decoded, and its items found in it, every offset and size checked
// against its bytes (memory_payload.h).

#include "storage/memory_payload.h"

#include "format/metadata_pickle.h"

#include <dcpp/core/checkpoint_error.h>

#include <ATen/ATen.h>

namespace dcpp::detail {

std::string memory_data_file(int rank) { return "__" + std::to_string(rank) + "_memory"; }

namespace {

constexpr std::size_t kPayloadPreambleBytes = 48;

uint64_t payload_u64(const char* at) {
  uint64_t value = 0;
  for (int i = 7; i >= 0; --i) value = (value << 8) | static_cast<unsigned char>(at[i]);
  return value;
}
uint32_t payload_u32(const char* at) {
  return static_cast<uint32_t>(payload_u64(at) & 0xffffffffu);
}

}  // namespace

void memory_step_corrupt(const std::string& where, const std::string& what) {
  throw CheckpointError(ErrorKind::kCorrupt, "memory step " + where + ": " + what +
                                                 "; the memory tier's other slot or the next "
                                                 "tier holds an older step");
}

MemoryPayload decode_memory_payload(std::string_view bytes, const std::string& where) {
  if (bytes.size() < kPayloadPreambleBytes || bytes.substr(0, 8) != "DCPPSTEP") {
    memory_step_corrupt(where, "no payload preamble");
  }
  const char* at = bytes.data();
  if (payload_u32(at + 8) != 1)
    memory_step_corrupt(where, "payload version " + std::to_string(payload_u32(at + 8)));
  MemoryPayload payload;
  payload.rank = static_cast<int>(payload_u32(at + 12));
  payload.world_size = static_cast<int>(payload_u32(at + 16));
  const uint64_t manifest = payload_u64(at + 24), metadata = payload_u64(at + 32),
                 data = payload_u64(at + 40);
  const uint64_t available = bytes.size() - kPayloadPreambleBytes;
  if (manifest > available || metadata > available - manifest) {
    memory_step_corrupt(where, "its sizes exceed its " + std::to_string(bytes.size()) + " bytes");
  }
  const uint64_t head = kPayloadPreambleBytes + manifest + metadata;
  const uint64_t data_start = head + (64 - head % 64) % 64;
  if (data_start > bytes.size() || data != bytes.size() - data_start) {
    memory_step_corrupt(where,
                        "its data section is not the " + std::to_string(data) + " bytes it names");
  }
  payload.manifest = bytes.substr(kPayloadPreambleBytes, manifest);
  payload.metadata =
      decode_metadata(bytes.substr(kPayloadPreambleBytes + manifest, metadata), where);
  payload.data = bytes.substr(data_start);
  return payload;
}

MemoryChunk memory_chunk(const Metadata& metadata, const MetadataIndex& index,
                         const StorageInfo& info, const MemoryPayload& payload,
                         const std::string& where) {
  MemoryChunk found;
  for (const auto& [name, entry] : metadata.state_dict_metadata) {
    if (name == index.fqn) found.tensor = std::get_if<TensorStorageMetadata>(&entry);
  }
  if (found.tensor != nullptr && index.offset) {
    for (const ChunkStorageMetadata& candidate : found.tensor->chunks) {
      if (candidate.offsets == *index.offset) found.chunk = &candidate;
    }
  }
  if (found.chunk == nullptr) {
    memory_step_corrupt(where, "no chunk of '" + index.fqn + "' at the offsets asked for");
  }
  const int64_t expected = c10::multiply_integers(found.chunk->sizes) *
                           static_cast<int64_t>(at::elementSize(found.tensor->properties.dtype));
  if (info.offset < 0 || info.length != expected ||
      static_cast<uint64_t>(info.offset) > payload.data.size() ||
      static_cast<uint64_t>(expected) > payload.data.size() - info.offset) {
    memory_step_corrupt(where, "the chunk of '" + index.fqn + "' is not the " +
                                   std::to_string(expected) +
                                   " bytes in its data that its shape and dtype take");
  }
  found.bytes = payload.data.substr(static_cast<std::size_t>(info.offset),
                                    static_cast<std::size_t>(expected));
  return found;
}

std::string_view memory_value_bytes(const StorageInfo& info, const MemoryPayload& payload,
                                    const std::string& key, const std::string& where) {
  if (info.offset < 0 || info.length < 0 ||
      static_cast<uint64_t>(info.offset) > payload.data.size() ||
      static_cast<uint64_t>(info.length) > payload.data.size() - info.offset) {
    memory_step_corrupt(where, "the value '" + key + "' lies outside its data");
  }
  return payload.data.substr(static_cast<std::size_t>(info.offset),
                             static_cast<std::size_t>(info.length));
}

}  // namespace dcpp::detail
