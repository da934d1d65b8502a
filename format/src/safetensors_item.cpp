#include "format/safetensors_item.h"

#include "core/shape_string.h"
#include "format/zstd_stream.h"

#include <dcpp/core/checkpoint_error.h>

#include <ATen/ATen.h>

#include <nlohmann/json.hpp>

#include <algorithm>

namespace dcpp::detail {

namespace {

using nlohmann::json;

constexpr const char* kShardingInfoKey = "DCP_SHARDING_INFO";

std::string offsets_text(const std::vector<int64_t>& v) { return shape_string(v); }

std::map<std::string, std::vector<int64_t>> parse_sharding_info(const std::string& text,
                                                                const std::string& what) {
  std::map<std::string, std::vector<int64_t>> saved;
  json info;
  try {
    info = json::parse(text);
  } catch (const json::exception& error) {
    throw CheckpointError(ErrorKind::kCorrupt, what + ": the safetensors metadata " +
                                                   kShardingInfoKey +
                                                   " is not valid JSON: " + error.what());
  }
  if (!info.is_object()) {
    throw CheckpointError(ErrorKind::kCorrupt, what + ": the safetensors metadata " +
                                                   kShardingInfoKey + " is not a JSON object");
  }
  for (const auto& [key, entry] : info.items()) {
    if (!entry.is_object() || !entry.contains("saved_offsets")) continue;
    const json& offsets = entry["saved_offsets"];
    bool valid = offsets.is_array();
    std::vector<int64_t> values;
    for (const json& offset : valid ? offsets : json::array()) {
      valid = valid && offset.is_number_integer();
      if (valid) values.push_back(offset.get<int64_t>());
    }
    if (!valid) {
      throw CheckpointError(ErrorKind::kCorrupt,
                            what + ": the safetensors metadata " + kShardingInfoKey + " gives '" +
                                key + "' saved_offsets that are not a list of integers");
    }
    saved.emplace(key, std::move(values));
  }
  return saved;
}

}  // namespace

StoredLayout sniff_stored_layout(const RandomAccessData& file, uint64_t offset) {
  const uint64_t size = file.size();
  unsigned char first[9] = {};
  const std::size_t n =
      offset < size ? static_cast<std::size_t>(std::min<uint64_t>(9, size - offset)) : 0;
  if (n > 0) file.read_exactly(offset, first, n);
  if (starts_with_zstd_magic(first, n)) return StoredLayout::kZstd;
  // A safetensors header: a plausible length, then a JSON object.
  if (n == 9 && first[8] == '{') {
    uint64_t length = 0;
    for (int i = 7; i >= 0; --i) length = (length << 8) | first[i];
    if (length <= kMaxSafetensorsHeader && length <= size - offset - 8) {
      return StoredLayout::kSafetensors;
    }
  }
  // A zip local header, or bytes that are neither: the archive reader says what is wrong.
  return StoredLayout::kTorchSave;
}

uint64_t SafetensorsBlob::end() const {
  uint64_t data_end = 0;
  for (const SafetensorsTensor& entry : header.tensors) data_end = std::max(data_end, entry.end);
  return offset + header.data_start + data_end;
}

SafetensorsBlob read_safetensors_blob(const RandomAccessData& file, uint64_t offset,
                                      const std::string& where) {
  const std::string what = where + ": the safetensors blob at byte " + std::to_string(offset);
  const uint64_t size = file.size();
  if (offset > size || size - offset < 8) {
    throw CheckpointError(ErrorKind::kCorrupt,
                          what + " is cut short: the " + std::to_string(size) +
                              "-byte file ends before its 8-byte header length (a truncated file, "
                              "or an item that is neither a torch.save archive nor safetensors)");
  }
  char first[8];
  file.read_exactly(offset, first, 8);
  const uint64_t length =
      decode_safetensors_header_length(std::string_view(first, 8), size - offset, what);
  std::string text(static_cast<std::size_t>(length), '\0');
  file.read_exactly(offset + 8, text.data(), text.size());
  SafetensorsBlob blob;
  blob.offset = offset;
  blob.header = parse_safetensors_header(text, size - offset - 8 - length, what);
  if (const std::string* sharding = blob.header.find_metadata(kShardingInfoKey)) {
    blob.saved_offsets = parse_sharding_info(*sharding, what);
  }
  for (std::size_t i = 0; i < blob.header.tensors.size(); ++i) {
    blob.by_name.emplace(blob.header.tensors[i].name, i);
  }
  return blob;
}

const SafetensorsTensor& find_safetensors_chunk(const SafetensorsBlob& blob, const std::string& key,
                                                at::ScalarType dtype,
                                                const ChunkStorageMetadata& chunk,
                                                uint64_t item_length, const std::string& where) {
  const std::string what =
      where + " (in the safetensors blob at byte " + std::to_string(blob.offset) + ")";
  const auto found = blob.by_name.find(key);
  const SafetensorsTensor* entry =
      found == blob.by_name.end() ? nullptr : &blob.header.tensors[found->second];
  if (entry == nullptr) {
    throw CheckpointError(ErrorKind::kCorrupt,
                          what +
                              ": the blob holds no tensor of this key; the data file does not "
                              "match .metadata");
  }
  if (entry->dtype != dtype) {
    throw CheckpointError(ErrorKind::kCorrupt, what + ": the stored tensor is " +
                                                   c10::toString(entry->dtype) +
                                                   " but .metadata says " + c10::toString(dtype));
  }
  if (entry->shape != chunk.sizes) {
    throw CheckpointError(ErrorKind::kCorrupt,
                          what + ": the stored tensor has shape " + shape_string(entry->shape) +
                              " but .metadata's chunk has " + shape_string(chunk.sizes));
  }
  if (entry->end - entry->begin != item_length) {
    throw CheckpointError(ErrorKind::kCorrupt, what + ": the stored tensor has " +
                                                   std::to_string(entry->end - entry->begin) +
                                                   " bytes but .metadata says " +
                                                   std::to_string(item_length));
  }
  const auto saved = blob.saved_offsets.find(key);
  if (saved != blob.saved_offsets.end() && saved->second != chunk.offsets) {
    throw CheckpointError(ErrorKind::kCorrupt,
                          what + ": the blob's " + kShardingInfoKey + " saved it at offsets " +
                              offsets_text(saved->second) + " but .metadata's chunk is at " +
                              offsets_text(chunk.offsets));
  }
  return *entry;
}

void read_safetensors_chunk(const RandomAccessData& file, const SafetensorsBlob& blob,
                            const SafetensorsTensor& entry, const TensorReadRequest& request,
                            const std::string& where) {
  const uint64_t base = blob.offset + blob.header.data_start + entry.begin;
  const FileRangeSource data(file, base, entry.end - entry.begin, where);
  const at::Tensor& dest = request.dest;
  const int64_t element_size = static_cast<int64_t>(c10::elementSize(entry.dtype));
  if (request.storage_offsets.size() != entry.shape.size() ||
      request.lengths.size() != entry.shape.size()) {
    throw CheckpointError(ErrorKind::kCorrupt, where + ": the read asks for a box of " +
                                                   std::to_string(request.lengths.size()) +
                                                   " dimensions of a tensor of " +
                                                   std::to_string(entry.shape.size()));
  }
  for (std::size_t d = 0; d < entry.shape.size(); ++d) {
    if (request.storage_offsets[d] < 0 || request.lengths[d] < 0 ||
        request.storage_offsets[d] > entry.shape[d] - request.lengths[d]) {
      throw CheckpointError(ErrorKind::kCorrupt,
                            where + ": the read asks for a box outside the stored chunk of shape " +
                                shape_string(entry.shape));
    }
  }
  const bool dest_direct =
      dest.is_contiguous() && dest.scalar_type() == entry.dtype && dest.device().is_cpu();
  if (dest_direct) {
    const int64_t start =
        contiguous_range_start(entry.shape, request.storage_offsets, request.lengths);
    if (start >= 0) {
      data.read(static_cast<uint64_t>(start * element_size), dest.data_ptr(),
                static_cast<std::size_t>(dest.numel() * element_size));
      return;
    }
  }
  at::Tensor chunk = at::empty(entry.shape, at::TensorOptions().dtype(entry.dtype));
  data.read(0, chunk.data_ptr(), static_cast<std::size_t>(data.size()));
  at::Tensor view = chunk;
  for (std::size_t d = 0; d < request.lengths.size(); ++d) {
    view = view.narrow(static_cast<int64_t>(d), request.storage_offsets[d], request.lengths[d]);
  }
  dest.copy_(view);
}

}  // namespace dcpp::detail
