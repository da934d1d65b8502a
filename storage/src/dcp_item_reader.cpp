#include "dcp_item_reader.h"
#include "parallel_for.h"

#include "format/crc32.h"
#include "format/item_codec.h"
#include "format/safetensors_item.h"
#include "format/zstd_stream.h"

#include <dcpp/core/checkpoint_error.h>

#include <algorithm>
#include <filesystem>
#include <memory>

namespace dcpp::detail {

namespace {

// Items this small are read in one call and decoded from memory.
constexpr uint64_t kSmallItem = 256 * 1024;

}  // namespace

void check_data_file_name(const std::string& name, const std::string& location) {
  const std::filesystem::path relative(name);
  bool escapes = name.empty() || relative.is_absolute() || name.find('\0') != std::string::npos;
  for (const std::filesystem::path& part : relative) {
    escapes = escapes || part == ".." || part == ".";
  }
  if (escapes) {
    throw CheckpointError(ErrorKind::kCorrupt,
                          "checkpoint " + location + ": .metadata names data file '" + name +
                              "', which is not inside the checkpoint directory; refusing to "
                              "read it (the .metadata is malformed or hostile)");
  }
}

void DcpItemReader::set_checksums(std::optional<ItemChecksumIndex> checksums,
                                  std::string checksum_file) {
  checksums_ = std::move(checksums);
  checksum_file_ = std::move(checksum_file);
}

void DcpItemReader::set_up(const Metadata& metadata) {
  storage_.clear();
  transforms_.clear();
  for (const auto& [index, info] : metadata.storage_data) {
    check_data_file_name(info.relative_path, location_);
    const ItemTransforms transforms = parse_transform_descriptors(
        info.transform_descriptors, "checkpoint " + location_ + ", data file " +
                                        info.relative_path + ", key '" + index.fqn + "'");
    if (transforms.any()) transforms_.emplace(index, transforms);
    storage_.emplace(index, &info);
  }
  tensors_.clear();
  for (const auto& [key, storage] : metadata.state_dict_metadata) {
    if (const auto* tensor = std::get_if<TensorStorageMetadata>(&storage)) {
      tensors_.emplace(key, tensor);
    }
  }
}

const std::string& DcpItemReader::data_file_of(const ReadItem& item) const {
  return storage_info(item.storage_index).relative_path;
}

const StorageInfo& DcpItemReader::storage_info(const MetadataIndex& index) const {
  auto found = storage_.find(index);
  if (found == storage_.end()) {
    throw CheckpointError(ErrorKind::kCorrupt, "checkpoint " + location_ +
                                                   ": .metadata has no storage entry for a chunk "
                                                   "of '" +
                                                   index.fqn +
                                                   "'; the checkpoint is incomplete or malformed");
  }
  return *found->second;
}

void DcpItemReader::read_plan(
    const LoadPlan& plan, int thread_count,
    const std::function<void(const std::string& name, std::vector<const ReadItem*> items)>&
        read_file) const {
  std::map<std::string, std::vector<const ReadItem*>> by_file;
  for (const ReadItem& item : plan.items) by_file[data_file_of(item)].push_back(&item);
  std::vector<std::pair<std::string, std::vector<const ReadItem*>>> files(by_file.begin(),
                                                                          by_file.end());
  parallel_for(files.size(), thread_count,
               [&](std::size_t i) { read_file(files[i].first, std::move(files[i].second)); });
}

void DcpItemReader::read_file(const RandomAccessData& data, const std::string& name,
                              const std::string& data_name, std::vector<const ReadItem*> items,
                              LoadPlanner& planner) const {
  std::sort(items.begin(), items.end(), [&](const ReadItem* a, const ReadItem* b) {
    return storage_info(a->storage_index).offset < storage_info(b->storage_index).offset;
  });
  const uint64_t file_size = data.size();
  const auto where = [&](const ReadItem* item) {
    return "data file " + data_name + ", key '" + item->storage_index.fqn + "'";
  };
  // A truncated file: name the first item (in file order) that lies past its end, before
  // reading any.
  for (const ReadItem* item : items) {
    const StorageInfo& info = storage_info(item->storage_index);
    if (info.offset < 0 || info.length < 0 || static_cast<uint64_t>(info.offset) > file_size ||
        static_cast<uint64_t>(info.length) > file_size - static_cast<uint64_t>(info.offset)) {
      throw CheckpointError(ErrorKind::kCorrupt,
                            where(item) + ": the item at bytes [" + std::to_string(info.offset) +
                                ", " + std::to_string(info.offset + info.length) +
                                ") lies past the end of the " + std::to_string(file_size) +
                                "-byte file; the file is truncated, load an earlier checkpoint");
    }
  }
  // Safetensors blobs (DCP's SAFETENSORS format) by offset: each header is read once.
  std::map<uint64_t, SafetensorsBlob> blobs;
  for (const ReadItem* item : items) {
    const StorageInfo& info = storage_info(item->storage_index);
    const std::string item_where = where(item);
    const auto transforms = transforms_.find(item->storage_index);
    if (transforms != transforms_.end()) {
      read_zstd_item(data, name, data_name, *item, info, transforms->second.zstd_layers, planner);
      continue;
    }
    const ItemChecksum* expected = item_checksum(name, info, item_where);
    // dcpp writes no safetensors blobs: an item its checksum file lists is an archive.
    if (item->type == LoadItemType::kTensor && expected == nullptr) {
      const StoredLayout layout = sniff_stored_layout(data, static_cast<uint64_t>(info.offset));
      if (layout == StoredLayout::kZstd) {
        throw CheckpointError(ErrorKind::kCorrupt,
                              item_where +
                                  ": the item is a zstd frame but .metadata lists no "
                                  "stream transform for it; the checkpoint is inconsistent");
      }
      if (layout == StoredLayout::kSafetensors) {
        const uint64_t offset = static_cast<uint64_t>(info.offset);
        auto blob = blobs.find(offset);
        if (blob == blobs.end()) {
          blob = blobs.emplace(offset, read_safetensors_blob(data, offset, item_where)).first;
        }
        const Chunk chunk = find_chunk(*item, item_where);
        const SafetensorsTensor& entry = find_safetensors_chunk(
            blob->second, item->storage_index.fqn, chunk.tensor->properties.dtype, *chunk.chunk,
            static_cast<uint64_t>(info.length), item_where);
        TensorReadRequest request = tensor_request(*item, chunk, planner);
        read_safetensors_chunk(data, blob->second, entry, request, item_where);
        planner.commit_tensor(*item, request.dest);
        continue;
      }
    }
    const uint64_t length = static_cast<uint64_t>(info.length);
    std::string small;
    std::unique_ptr<ByteSource> source;
    bool verify = options_.verify_checksums;
    if (length <= kSmallItem) {
      small.resize(length);
      data.read_exactly(static_cast<uint64_t>(info.offset), small.data(), length);
      source = std::make_unique<MemorySource>(small, item_where);
      if (expected != nullptr) {
        // In memory already: check the whole item now; nothing in it needs checking again.
        check_item_crc(*source, *expected, crc32(0, small.data(), small.size()));
        verify = false;
        expected = nullptr;
      }
    } else {
      source = std::make_unique<FileRangeSource>(data, static_cast<uint64_t>(info.offset), length,
                                                 item_where);
    }
    if (item->type == LoadItemType::kBytes) {
      planner.load_bytes(*item, read_bytes_item(*source, verify, expected));
    } else {
      read_tensor(*item, *source, planner, verify, expected);
    }
  }
}

// A zstd-compressed item: the stored bytes are decompressed into memory (checked against the
// checksum file as they are read, when it lists the item), never past the item's bound, and the
// archive inside is read from there.
void DcpItemReader::read_zstd_item(const RandomAccessData& data, const std::string& name,
                                   const std::string& data_name, const ReadItem& item,
                                   const StorageInfo& info, int layers,
                                   LoadPlanner& planner) const {
  const std::string item_where =
      "data file " + data_name + ", key '" + item.storage_index.fqn + "' (zstd-compressed)";
  const ItemChecksum* expected = item_checksum(name, info, item_where);
  const FileRangeSource stored(data, static_cast<uint64_t>(info.offset),
                               static_cast<uint64_t>(info.length), item_where);
  std::optional<Chunk> chunk;
  uint64_t bound = options_.max_decompressed_value_size;
  if (item.type == LoadItemType::kTensor) {
    chunk = find_chunk(item, item_where);
    bound = tensor_archive_bound(chunk->tensor->properties.dtype, chunk->chunk->sizes);
  }
  uint32_t stored_crc = 0;
  const ZstdOutput archive = zstd_decompress_bounded(stored, layers, bound, &stored_crc);
  if (expected != nullptr) {
    check_item_crc(stored, *expected, stored_crc);
  }
  // With the stored bytes checked, the archive is as written: its own checks are redundant.
  const bool verify = options_.verify_checksums && expected == nullptr;
  const MemorySource source(archive.view(), item_where);
  if (item.type == LoadItemType::kBytes) {
    planner.load_bytes(item, read_bytes_item(source, verify));
    return;
  }
  TensorReadRequest request = tensor_request(item, *chunk, planner);
  read_tensor_item(source, request, verify);
  planner.commit_tensor(item, request.dest);
}

// The item's entry in the checksum file; nullptr when there is none to check against.
const ItemChecksum* DcpItemReader::item_checksum(const std::string& file, const StorageInfo& info,
                                                 const std::string& where) const {
  if (!options_.verify_checksums || !checksums_) {
    return nullptr;
  }
  const ItemChecksum* expected = checksums_->find(file, static_cast<uint64_t>(info.offset));
  if (expected == nullptr || expected->length != static_cast<uint64_t>(info.length)) {
    throw CheckpointError(
        ErrorKind::kCorrupt,
        where + ": the checksum file " + checksum_file_ + " has no entry for the item at bytes [" +
            std::to_string(info.offset) + ", " + std::to_string(info.offset + info.length) +
            "), though it matches .metadata; the checkpoint is inconsistent");
  }
  return expected;
}

// The tensor and chunk `.metadata` gives for a tensor item. Throws CheckpointError naming `where`
// when it has none.
DcpItemReader::Chunk DcpItemReader::find_chunk(const ReadItem& item,
                                               const std::string& where) const {
  auto found = tensors_.find(item.storage_index.fqn);
  if (found == tensors_.end()) {
    throw CheckpointError(ErrorKind::kCorrupt,
                          where + ": .metadata does not describe it as a tensor");
  }
  const TensorStorageMetadata& tensor = *found->second;
  const std::vector<ChunkStorageMetadata>& chunks = tensor.chunks;
  const int64_t hint = item.storage_index.index.value_or(-1);
  const ChunkStorageMetadata* chunk = nullptr;
  if (hint >= 0 && hint < static_cast<int64_t>(chunks.size()) &&
      chunks[static_cast<std::size_t>(hint)].offsets == item.storage_index.offset) {
    chunk = &chunks[static_cast<std::size_t>(hint)];
  } else {
    for (const auto& candidate : chunks) {
      if (candidate.offsets == item.storage_index.offset) {
        chunk = &candidate;
      }
    }
  }
  if (chunk == nullptr) {
    throw CheckpointError(ErrorKind::kCorrupt,
                          where + ": .metadata lists no chunk at these offsets");
  }
  return Chunk{&tensor, chunk};
}

TensorReadRequest DcpItemReader::tensor_request(const ReadItem& item, const Chunk& chunk,
                                                LoadPlanner& planner) {
  TensorReadRequest request;
  request.dest = planner.resolve_tensor(item);
  request.storage_offsets = item.storage_offsets;
  request.lengths = item.lengths;
  request.expected_dtype = chunk.tensor->properties.dtype;
  request.expected_chunk_sizes = chunk.chunk->sizes;
  return request;
}

void DcpItemReader::read_tensor(const ReadItem& item, const ByteSource& source,
                                LoadPlanner& planner, bool verify,
                                const ItemChecksum* expected) const {
  const Chunk chunk = find_chunk(item, source.describe());
  TensorReadRequest request = tensor_request(item, chunk, planner);
  read_tensor_item(source, request, verify, expected);
  planner.commit_tensor(item, request.dest);
}

}  // namespace dcpp::detail
