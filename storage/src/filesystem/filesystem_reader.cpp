// The file system reader. `.metadata` is decoded by dcpp's restricted unpickler; every file it
// names must lie inside the checkpoint directory, and every item must lie inside its file, before
// any data is read. Items of one data file are read by one thread, in file order.
//
// With checksums verified (the default) and a checksum file present (checksum_file.h), `.metadata`
// must match its CRC-32 before it is decoded, and every item read in full must match its CRC-32;
// without a checksum file, items get the format's own checks (item_codec.h).
//
// Items come in the layouts PyTorch 2.14 writes: a `torch.save` archive; the same in zstd frames
// (`transform_descriptors` ["stream.zstd/1"]; decompressed into memory, bounded by what
// `.metadata` lets the item hold, zstd_stream.h); a tensor in the file's safetensors blob (DCP's
// SAFETENSORS format, told apart by its first bytes; its header parsed once per blob and checked
// against `.metadata`, safetensors_item.h).
//
// Without `.metadata`, a checkpoint saved without collectives (`__<r>.metadata` per rank) is read
// as the merge of its ranks' metadata, each checked against its `__<r>.checksums`
// (per_rank_metadata.h).

#include <dcpp/storage/filesystem_reader.h>

#include "format/checksum_file.h"
#include "format/crc32.h"
#include "format/file_io.h"
#include "format/item_codec.h"
#include "format/metadata_pickle.h"
#include "format/safetensors_item.h"
#include "format/transform_descriptors.h"
#include "format/zstd_stream.h"
#include "parallel_for.h"
#include "storage/per_rank_metadata.h"

#include <dcpp/core/checkpoint_error.h>

#include <sys/vfs.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <map>
#include <optional>

namespace dcpp {

namespace {

namespace fs = std::filesystem;

// Items this small are read in one call and decoded from memory.
constexpr uint64_t kSmallItem = 256 * 1024;

void check_relative_path(const std::string& path, const fs::path& directory) {
  const fs::path relative(path);
  bool escapes = path.empty() || relative.is_absolute() || path.find('\0') != std::string::npos;
  for (const fs::path& part : relative) {
    escapes = escapes || part == ".." || part == ".";
  }
  if (escapes) {
    throw CheckpointError(ErrorKind::kCorrupt,
                          "checkpoint " + directory.string() + ": .metadata names data file '" +
                              path +
                              "', which is not inside the checkpoint directory; refusing to "
                              "read it (the .metadata is malformed or hostile)");
  }
}

// statfs() f_type values of file systems whose bytes come over a network.
constexpr int64_t kNetworkFileSystems[] = {
    0x6969,      // NFS
    0x517B,      // SMB
    0xFF534D42,  // CIFS
    0xFE534D42,  // SMB2
    0x0BD00BD0,  // Lustre
    0x47504653,  // GPFS (IBM Storage Scale)
    0x00C36400,  // CephFS
    0x19830326,  // BeeGFS
    0x65735546,  // FUSE (GlusterFS, sshfs, s3fs, ...)
    0x01021997,  // 9p
    0x5346414F,  // AFS
};

}  // namespace

// Hidden: as a nested class of an exported class, its members would otherwise be exported too.
class [[gnu::visibility("hidden")]] FileSystemReader::Impl {
 public:
  Impl(fs::path directory, FileSystemReaderOptions options)
      : directory_(std::move(directory)), options_(options) {
    if (options_.thread_count < 1) {
      throw CheckpointError(ErrorKind::kUsage,
                            "FileSystemReaderOptions::thread_count must be at least 1, not " +
                                std::to_string(options_.thread_count));
    }
  }

  Metadata read_metadata() {
    const fs::path path = directory_ / ".metadata";
    if (!fs::exists(path)) {
      const std::vector<int> ranks = detail::find_rank_metadata_files(directory_);
      if (!ranks.empty()) {
        return read_per_rank_metadata(ranks);
      }
      throw CheckpointError(
          ErrorKind::kNotFound,
          "no complete checkpoint at " + directory_.string() +
              ": .metadata is missing, and so is __0.metadata (the directory does "
              "not exist, or a save into it did not finish)");
    }
    checksum_file_ = detail::kChecksumFileName;
    detail::File file(path, detail::File::Mode::kRead);
    std::string bytes(file.size(), '\0');
    file.read_exactly(0, bytes.data(), bytes.size());
    checksums_.reset();
    if (options_.verify_checksums) {
      const auto save = detail::check_metadata_checksum(directory_, bytes);
      if (save && save->items) {
        checksums_.emplace(*save->items);
      }
    }
    Metadata metadata = detail::decode_metadata(bytes, path.string());
    for (const auto& [index, info] : metadata.storage_data) {
      check_relative_path(info.relative_path, directory_);
    }
    return metadata;
  }

  void set_up(const Metadata& metadata, int rank, bool is_coordinator) {
    storage_.clear();
    transforms_.clear();
    for (const auto& [index, info] : metadata.storage_data) {
      check_relative_path(info.relative_path, directory_);
      const detail::ItemTransforms transforms = detail::parse_transform_descriptors(
          info.transform_descriptors, "checkpoint " + directory_.string() + ", data file " +
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

  void read_data(const LoadPlan& plan, LoadPlanner& planner) {
    std::map<std::string, std::vector<const ReadItem*>> by_file;
    for (const ReadItem& item : plan.items) {
      by_file[storage_info(item.storage_index).relative_path].push_back(&item);
    }
    std::vector<std::pair<std::string, std::vector<const ReadItem*>>> files(by_file.begin(),
                                                                            by_file.end());
    detail::parallel_for(files.size(), options_.thread_count, [&](std::size_t i) {
      read_file(files[i].first, files[i].second, planner);
    });
  }

  bool is_shared_storage() const {
    struct statfs info {};
    if (::statfs(directory_.c_str(), &info) != 0) {
      return false;
    }
    const auto type = static_cast<int64_t>(static_cast<uint32_t>(info.f_type));
    return std::find(std::begin(kNetworkFileSystems), std::end(kNetworkFileSystems), type) !=
           std::end(kNetworkFileSystems);
  }

  uint64_t bytes_read() const { return bytes_read_.load(); }

  const fs::path& directory() const { return directory_; }
  const FileSystemReaderOptions& options() const { return options_; }

 private:
  // A checkpoint saved without collectives: its ranks' metadata, merged.
  Metadata read_per_rank_metadata(const std::vector<int>& ranks) {
    detail::PerRankCheckpoint checkpoint =
        detail::read_per_rank_checkpoint(directory_, ranks, options_.verify_checksums);
    checksums_ = std::move(checkpoint.checksums);
    checksum_file_ = "__<rank>.checksums";
    for (const auto& [index, info] : checkpoint.merged.storage_data) {
      check_relative_path(info.relative_path, directory_);
    }
    return std::move(checkpoint.merged);
  }

  const StorageInfo& storage_info(const MetadataIndex& index) const {
    auto found = storage_.find(index);
    if (found == storage_.end()) {
      throw CheckpointError(ErrorKind::kCorrupt,
                            "checkpoint " + directory_.string() +
                                ": .metadata has no storage "
                                "entry for a chunk of '" +
                                index.fqn + "'; the checkpoint is incomplete or malformed");
    }
    return *found->second;
  }

  void read_file(const std::string& name, std::vector<const ReadItem*> items, LoadPlanner& planner)
      const {
    std::sort(items.begin(), items.end(), [&](const ReadItem* a, const ReadItem* b) {
      return storage_info(a->storage_index).offset < storage_info(b->storage_index).offset;
    });
    detail::File file(directory_ / name, detail::File::Mode::kRead);
    file.count_reads_in(bytes_read_);
    const uint64_t file_size = file.size();
    const auto where = [&](const ReadItem* item) {
      return "data file " + (directory_ / name).string() + ", key '" + item->storage_index.fqn +
             "'";
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
    std::map<uint64_t, detail::SafetensorsBlob> blobs;
    for (const ReadItem* item : items) {
      const StorageInfo& info = storage_info(item->storage_index);
      const std::string item_where = where(item);
      const auto transforms = transforms_.find(item->storage_index);
      if (transforms != transforms_.end()) {
        read_zstd_item(file, name, *item, info, transforms->second.zstd_layers, planner);
        continue;
      }
      const detail::ItemChecksum* expected = item_checksum(name, info, item_where);
      // dcpp writes no safetensors blobs: an item its checksum file lists is an archive.
      if (item->type == LoadItemType::kTensor && expected == nullptr) {
        const detail::StoredLayout layout =
            detail::sniff_stored_layout(file, static_cast<uint64_t>(info.offset));
        if (layout == detail::StoredLayout::kZstd) {
          throw CheckpointError(ErrorKind::kCorrupt,
                                item_where +
                                    ": the item is a zstd frame but .metadata lists no "
                                    "stream transform for it; the checkpoint is inconsistent");
        }
        if (layout == detail::StoredLayout::kSafetensors) {
          const uint64_t offset = static_cast<uint64_t>(info.offset);
          auto blob = blobs.find(offset);
          if (blob == blobs.end()) {
            blob = blobs.emplace(offset, detail::read_safetensors_blob(file, offset, item_where))
                       .first;
          }
          const Chunk chunk = find_chunk(*item, item_where);
          const detail::SafetensorsTensor& entry = detail::find_safetensors_chunk(
              blob->second, item->storage_index.fqn, chunk.tensor->properties.dtype, *chunk.chunk,
              static_cast<uint64_t>(info.length), item_where);
          detail::TensorReadRequest request = tensor_request(*item, chunk, planner);
          detail::read_safetensors_chunk(file, blob->second, entry, request, item_where);
          planner.commit_tensor(*item, request.dest);
          continue;
        }
      }
      const uint64_t length = static_cast<uint64_t>(info.length);
      std::string small;
      std::unique_ptr<detail::ByteSource> source;
      bool verify = options_.verify_checksums;
      if (length <= kSmallItem) {
        small.resize(length);
        file.read_exactly(static_cast<uint64_t>(info.offset), small.data(), length);
        source = std::make_unique<detail::MemorySource>(small, item_where);
        if (expected != nullptr) {
          // In memory already: check the whole item now; nothing in it needs checking again.
          detail::check_item_crc(*source, *expected, detail::crc32(0, small.data(), small.size()));
          verify = false;
          expected = nullptr;
        }
      } else {
        source = std::make_unique<detail::FileRangeSource>(file, static_cast<uint64_t>(info.offset),
                                                           length, item_where);
      }
      if (item->type == LoadItemType::kBytes) {
        planner.load_bytes(*item, detail::read_bytes_item(*source, verify, expected));
      } else {
        read_tensor(*item, *source, planner, verify, expected);
      }
    }
  }

  // A zstd-compressed item: the stored bytes are decompressed into memory (checked against the
  // checksum file as they are read, when it lists the item), never past the item's bound, and
  // the archive inside is read from there.
  void read_zstd_item(const detail::File& file, const std::string& name, const ReadItem& item,
                      const StorageInfo& info, int layers, LoadPlanner& planner) const {
    const std::string item_where = "data file " + (directory_ / name).string() + ", key '" +
                                   item.storage_index.fqn + "' (zstd-compressed)";
    const detail::ItemChecksum* expected = item_checksum(name, info, item_where);
    const detail::FileRangeSource stored(file, static_cast<uint64_t>(info.offset),
                                         static_cast<uint64_t>(info.length), item_where);
    std::optional<Chunk> chunk;
    uint64_t bound = options_.max_decompressed_value_size;
    if (item.type == LoadItemType::kTensor) {
      chunk = find_chunk(item, item_where);
      bound = detail::tensor_archive_bound(chunk->tensor->properties.dtype, chunk->chunk->sizes);
    }
    uint32_t stored_crc = 0;
    const detail::ZstdOutput archive =
        detail::zstd_decompress_bounded(stored, layers, bound, &stored_crc);
    if (expected != nullptr) {
      detail::check_item_crc(stored, *expected, stored_crc);
    }
    // With the stored bytes checked, the archive is as written: its own checks are redundant.
    const bool verify = options_.verify_checksums && expected == nullptr;
    const detail::MemorySource source(archive.view(), item_where);
    if (item.type == LoadItemType::kBytes) {
      planner.load_bytes(item, detail::read_bytes_item(source, verify));
      return;
    }
    detail::TensorReadRequest request = tensor_request(item, *chunk, planner);
    detail::read_tensor_item(source, request, verify);
    planner.commit_tensor(item, request.dest);
  }

  // The item's entry in the checksum file; nullptr when there is none to check against.
  const detail::ItemChecksum* item_checksum(const std::string& file, const StorageInfo& info,
                                            const std::string& where) const {
    if (!options_.verify_checksums || !checksums_) {
      return nullptr;
    }
    const detail::ItemChecksum* expected =
        checksums_->find(file, static_cast<uint64_t>(info.offset));
    if (expected == nullptr || expected->length != static_cast<uint64_t>(info.length)) {
      throw CheckpointError(
          ErrorKind::kCorrupt,
          where + ": the checksum file " + (directory_ / checksum_file_).string() +
              " has no entry for the item at bytes [" + std::to_string(info.offset) + ", " +
              std::to_string(info.offset + info.length) +
              "), though it matches .metadata; the checkpoint is inconsistent");
    }
    return expected;
  }

  struct Chunk {
    const TensorStorageMetadata* tensor;
    const ChunkStorageMetadata* chunk;
  };

  // The tensor and chunk `.metadata` gives for a tensor item. Throws CheckpointError naming
  // `where` when it has none.
  Chunk find_chunk(const ReadItem& item, const std::string& where) const {
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

  static detail::TensorReadRequest tensor_request(const ReadItem& item, const Chunk& chunk,
                                                  LoadPlanner& planner) {
    detail::TensorReadRequest request;
    request.dest = planner.resolve_tensor(item);
    request.storage_offsets = item.storage_offsets;
    request.lengths = item.lengths;
    request.expected_dtype = chunk.tensor->properties.dtype;
    request.expected_chunk_sizes = chunk.chunk->sizes;
    return request;
  }

  void read_tensor(const ReadItem& item, const detail::ByteSource& source, LoadPlanner& planner,
                   bool verify, const detail::ItemChecksum* expected) const {
    const Chunk chunk = find_chunk(item, source.describe());
    detail::TensorReadRequest request = tensor_request(item, chunk, planner);
    detail::read_tensor_item(source, request, verify, expected);
    planner.commit_tensor(item, request.dest);
  }

  fs::path directory_;
  FileSystemReaderOptions options_;
  std::map<MetadataIndex, const StorageInfo*> storage_;
  std::map<std::string, const TensorStorageMetadata*> tensors_;
  // The stream transforms of the items that have any.
  std::map<MetadataIndex, detail::ItemTransforms> transforms_;
  // The item checksums of the save whose .metadata read_metadata() read, when it has a checksum
  // file that knows them.
  std::optional<detail::ItemChecksumIndex> checksums_;
  std::string checksum_file_ = detail::kChecksumFileName;  // for messages
  mutable std::atomic<uint64_t> bytes_read_{0};            // by read_data's threads
};

FileSystemReader::FileSystemReader(std::filesystem::path directory, FileSystemReaderOptions options)
    : impl_(std::make_unique<Impl>(std::move(directory), options)) {}
FileSystemReader::~FileSystemReader() = default;

Metadata FileSystemReader::read_metadata() { return impl_->read_metadata(); }

void FileSystemReader::set_up(const Metadata& metadata, int rank, bool is_coordinator) {
  impl_->set_up(metadata, rank, is_coordinator);
}

void FileSystemReader::read_data(const LoadPlan& plan, LoadPlanner& planner) {
  impl_->read_data(plan, planner);
}

bool FileSystemReader::is_shared_storage() const { return impl_->is_shared_storage(); }
uint64_t FileSystemReader::bytes_read() const { return impl_->bytes_read(); }

const std::filesystem::path& FileSystemReader::directory() const { return impl_->directory(); }
const FileSystemReaderOptions& FileSystemReader::options() const { return impl_->options(); }

}  // namespace dcpp
