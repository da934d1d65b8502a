// The checks of `dcpp verify`, in three passes: `.metadata` against itself (its CRC-32 in the
// checksum file when there is one, chunk coverage, storage entries), each data file against
// `.metadata` (presence, bounds, overlaps, stray bytes), each item against itself (its CRC-32 in
// the checksum file; without one, or when it differs, the zip layout and every record's CRC-32;
// then the tensor's dtype and shape). Everything is read in blocks; a problem never stops the
// others. A zstd-compressed item is decompressed (bounded as the reader bounds it) and its archive
// checked the same way; its checksum covers its stored bytes. The tensors of DCP's SAFETENSORS
// format share one blob per file: its header is checked once, each tensor against `.metadata`,
// and the blob counts as one range of the file.
// A checkpoint saved without collectives (`__<r>.metadata` per rank, no `.metadata`) is
// checked as the merge of its ranks' metadata (per_rank_metadata.h), each rank's file against its
// `__<r>.checksums`, and every item every rank wrote is checked, replicas included.

#include "verify/verify_command.h"

#include "common/chunk_coverage.h"
#include "common/manager_root.h"
#include "common/megatron_lm_root.h"
#include "common/progress_bar.h"
#include "verify/megatron_verify.h"
#include "verify/verify_manager_root.h"

#include "format/checksum_file.h"
#include "format/crc32.h"
#include "format/file_io.h"
#include "format/item_codec.h"
#include "format/metadata_pickle.h"
#include "format/pickle/torch_pickle.h"
#include "format/safetensors_item.h"
#include "format/transform_descriptors.h"
#include "format/zip/zip_blob_reader.h"
#include "format/zip/zip_layout_check.h"
#include "format/zstd_stream.h"
#include "storage/location_files.h"
#include "storage/megatron_integrity.h"
#include "storage/per_rank_metadata.h"

#include <dcpp/core/checkpoint_error.h>
#include <dcpp/storage/checkpoint_layout.h>
#include <dcpp/storage/filesystem_reader.h>
#include <dcpp/storage/megatron_storage.h>

#include <ATen/ATen.h>

#include <algorithm>
#include <iostream>
#include <map>
#include <set>

namespace dcpp::tools {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string offsets_text(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

class Verifier {
 public:
  explicit Verifier(const std::string& location)
      : location_(location),
        directory_(location),
        files_io_(detail::open_location_files(location)),
        in_store_(!Location(location).is_directory()) {}

  json run() {
    const bool megatron = is_megatron();
    if (megatron) check_megatron_config();
    const bool decoded = read_metadata();
    if (decoded) {
      check_metadata();
      check_checksum_coverage();
      check_files();
      check_unreferenced();
    }
    check_integrity();
    if (megatron && decoded) check_megatron_contents();
    json report{{"ok", problems_.empty()},
                {"checkpoint", location_},
                {"entries", metadata_.state_dict_metadata.size()},
                {"items", items_.size()},
                {"files", files_.size()},
                {"bytes_read", bytes_read_},
                {"checksum_file", checksum_state_},
                {"problems", problems_}};
    if (integrity_state_) report["integrity_file"] = *integrity_state_;
    if (!metadata_files_.empty()) report["metadata_files"] = metadata_files_;
    return report;
  }

 private:
  void problem(const std::optional<std::string>& file, const std::optional<std::string>& key,
               const std::string& message) {
    problems_.push_back(json{{"file", file ? json(*file) : json(nullptr)},
                             {"key", key ? json(*key) : json(nullptr)},
                             {"problem", message}});
  }

  // A directory in Megatron-Core's layout (metadata.json, even a damaged one: the layout decides
  // as every reader does).
  bool is_megatron() const {
    if (in_store_) return false;
    try {
      return checkpoint_layout(Location(location_))->name() == kMegatronLayout;
    } catch (const c10::Error&) {
      return false;
    }
  }

  void add(const MegatronProblem& found) { problem(found.file, found.key, found.problem); }

  // metadata.json, as every reader checks it first (megatron_verify.h).
  void check_megatron_config() {
    if (const auto found = megatron_config_problem(directory_)) {
      add(*found);
      megatron_config_ok_ = false;
    }
  }

  // What Megatron's readers check of a readable checkpoint: its ShardedObjects whole, its common
  // state readable by load_common_state_dict (unless what that reader would trip on first, the
  // configuration or integrity.json, is reported already, or the common state's item is).
  void check_megatron_contents() {
    for (const MegatronProblem& found : sharded_object_problems(metadata_)) add(found);
    if (!megatron_config_ok_ || integrity_state_ == std::optional<std::string>("failed")) return;
    for (const json& p : problems_) {
      if (p["key"] == kMegatronCommonStateKey) return;
    }
    if (const auto found = common_state_problem(directory_, metadata_)) add(*found);
  }

  // Megatron-Core's integrity.json, when the directory has one: every file it lists against its
  // SHA-256 (storage/megatron_integrity.h).
  void check_integrity() {
    if (in_store_ || !detail::has_integrity_file(directory_)) return;
    try {
      detail::check_integrity_file(directory_);
      integrity_state_ = "checked";
    } catch (const c10::Error& error) {
      integrity_state_ = "failed";
      problem("integrity.json", std::nullopt, error.what_without_backtrace());
    }
  }

  bool read_metadata() {
    std::optional<std::string> bytes;
    try {
      bytes = files_io_->read(".metadata");
      if (!bytes) {
        // Saved without collectives: per-rank metadata, in directories only.
        const std::vector<int> ranks =
            in_store_ ? std::vector<int>{} : detail::find_rank_metadata_files(directory_);
        if (!ranks.empty()) return read_per_rank_metadata(ranks);
        problem(".metadata", std::nullopt,
                "missing (and so is __0.metadata): no complete checkpoint at " + location_);
        return false;
      }
      bytes_read_ += bytes->size();
      check_checksum_file(*bytes);
      metadata_ = detail::decode_metadata(*bytes, files_io_->describe(".metadata"));
      items_ = metadata_.storage_data;
      return true;
    } catch (const c10::Error& error) {
      problem(".metadata", std::nullopt, error.what_without_backtrace());
      return false;
    }
  }

  // The checksum file, when there is one: intact, and matching `.metadata` (whose bytes are
  // `metadata`). Its item checksums are used when both hold.
  void check_checksum_file(const std::string& metadata) {
    const std::string path = files_io_->describe(detail::kChecksumFileName);
    std::vector<detail::SaveChecksums> saves;
    try {
      const std::optional<std::string> bytes = files_io_->read(detail::kChecksumFileName);
      if (!bytes) {
        checksum_state_ = "absent";
        return;
      }
      checksum_state_ = "unusable";
      bytes_read_ += bytes->size();
      saves = detail::decode_checksum_file(*bytes, path);
    } catch (const c10::Error& error) {
      problem(detail::kChecksumFileName, std::nullopt, error.what_without_backtrace());
      return;
    }
    const detail::SaveChecksums* save = detail::find_save(saves, metadata);
    if (save == nullptr) {
      problem(".metadata", std::nullopt,
              detail::metadata_mismatch_message(saves, metadata, files_io_->describe(".metadata"),
                                                path));
      return;
    }
    checksum_state_ = "checked";
    if (save->items) {
      checksums_.emplace(*save->items);
      listed_items_ = save->items->size();
    }
  }

  // A checkpoint saved without collectives: every `__<r>.metadata`, each against its checksum file
  // when it has one, merged; the items are every rank's.
  bool read_per_rank_metadata(const std::vector<int>& ranks) {
    try {
      detail::check_rank_sequence(directory_, ranks);
    } catch (const c10::Error& error) {
      problem(std::nullopt, std::nullopt, error.what_without_backtrace());
      return false;
    }
    std::vector<detail::RankMetadata> decoded;
    std::vector<detail::ItemChecksum> listed;
    bool ok = true;
    bool any_checksums = false;
    for (const int rank : ranks) {
      const std::string name = detail::rank_metadata_file_name(rank);
      const std::string checksum_name = detail::rank_checksum_file_name(rank);
      metadata_files_.push_back(name);
      try {
        detail::File file(directory_ / name, detail::File::Mode::kRead);
        std::string bytes(file.size(), '\0');
        file.read_exactly(0, bytes.data(), bytes.size());
        bytes_read_ += bytes.size();
        if (fs::exists(directory_ / checksum_name)) {
          bytes_read_ += fs::file_size(directory_ / checksum_name);
          any_checksums = true;
          try {
            const auto save =
                detail::check_metadata_checksum(directory_, bytes, name, checksum_name);
            if (save && save->items) {
              listed.insert(listed.end(), save->items->begin(), save->items->end());
            }
          } catch (const c10::Error& error) {
            problem(checksum_name, std::nullopt, error.what_without_backtrace());
            checksum_state_ = "unusable";
          }
        }
        decoded.push_back(
            detail::RankMetadata{rank, (directory_ / name).string(),
                                 detail::decode_metadata(bytes, (directory_ / name).string())});
      } catch (const c10::Error& error) {
        problem(name, std::nullopt, error.what_without_backtrace());
        ok = false;
      }
    }
    if (!ok) return false;
    try {
      metadata_ = detail::merge_rank_metadata(decoded);
    } catch (const c10::Error& error) {
      problem(std::nullopt, std::nullopt, error.what_without_backtrace());
      return false;
    }
    for (const detail::RankMetadata& rank : decoded) {
      items_.insert(items_.end(), rank.metadata.storage_data.begin(),
                    rank.metadata.storage_data.end());
    }
    if (any_checksums && checksum_state_ != "unusable") {
      checksum_state_ = "checked";
      checksums_.emplace(listed);
      listed_items_ = listed.size();
      // Items of ranks without a checksum file get the format's checks only.
      for (const detail::RankMetadata& rank : decoded) {
        if (!fs::exists(directory_ / detail::rank_checksum_file_name(rank.rank))) {
          for (const auto& [index, info] : rank.metadata.storage_data) {
            files_without_checksums_.insert(info.relative_path);
          }
        }
      }
    }
    return true;
  }

  void check_metadata() {
    for (const auto& [key, stored] : metadata_.state_dict_metadata) {
      if (const auto* tensor = std::get_if<TensorStorageMetadata>(&stored)) {
        tensors_.emplace(key, tensor);
        for (const std::string& message : chunk_coverage_problems(tensor->size, tensor->chunks)) {
          problem(std::nullopt, key, message);
        }
      } else {
        values_.insert(key);
      }
    }
    std::set<MetadataIndex> stored;
    for (const auto& [index, info] : items_) {
      stored.insert(index);
      const std::string& key = index.fqn;
      auto tensor = tensors_.find(key);
      if (tensor == tensors_.end() && values_.count(key) == 0) {
        problem(info.relative_path, key, "a storage entry for a key .metadata does not list");
        continue;
      }
      if ((tensor != tensors_.end()) != index.offset.has_value()) {
        problem(info.relative_path, key,
                "the storage entry's kind (tensor chunk or value) disagrees with .metadata");
        continue;
      }
      const ChunkStorageMetadata* chunk = nullptr;
      if (tensor != tensors_.end()) {
        for (const ChunkStorageMetadata& candidate : tensor->second->chunks) {
          if (candidate.offsets == *index.offset) chunk = &candidate;
        }
        if (chunk == nullptr) {
          problem(info.relative_path, key,
                  "a storage entry at offsets " + offsets_text(*index.offset) +
                      " for which the tensor has no chunk");
          continue;
        }
      }
      detail::ItemTransforms transforms;
      try {
        transforms = detail::parse_transform_descriptors(
            info.transform_descriptors, "data file " + info.relative_path + ", key '" + key + "'");
      } catch (const c10::Error& error) {
        problem(info.relative_path, key, error.what_without_backtrace());
        continue;
      }
      files_[info.relative_path].push_back(Item{&index, &info, chunk, transforms.zstd_layers});
    }
    for (const auto& [key, tensor] : tensors_) {
      for (const ChunkStorageMetadata& chunk : tensor->chunks) {
        if (stored.count(MetadataIndex{key, chunk.offsets, std::nullopt}) == 0) {
          problem(std::nullopt, key,
                  "the chunk at offsets " + offsets_text(chunk.offsets) + " has no storage entry");
        }
      }
    }
    for (const std::string& key : values_) {
      if (stored.count(MetadataIndex{key, std::nullopt, std::nullopt}) == 0) {
        problem(std::nullopt, key, "the value has no storage entry");
      }
    }
  }

  // Every item of .metadata has an entry in the checksum file, and every entry an item.
  void check_checksum_coverage() {
    if (!checksums_) return;
    std::size_t found = 0;
    for (const auto& [name, items] : files_) {
      if (files_without_checksums_.count(name) != 0) continue;
      for (const Item& item : items) {
        const detail::ItemChecksum* expected =
            checksums_->find(name, static_cast<uint64_t>(item.info->offset));
        if (expected != nullptr && expected->length == static_cast<uint64_t>(item.info->length)) {
          ++found;
        } else {
          problem(name, item.index->fqn,
                  "the checksum file has no entry for the item at bytes [" +
                      std::to_string(item.info->offset) + ", " +
                      std::to_string(item.info->offset + item.info->length) + ")");
        }
      }
    }
    if (found != listed_items_) {
      problem(detail::kChecksumFileName, std::nullopt,
              "lists " + std::to_string(listed_items_) + " items for this .metadata, of which " +
                  std::to_string(found) + " are items of .metadata");
    }
  }

  static bool escapes(const std::string& name) {
    const fs::path relative(name);
    bool bad = name.empty() || relative.is_absolute() || name.find('\0') != std::string::npos;
    for (const fs::path& part : relative) bad = bad || part == ".." || part == ".";
    return bad;
  }

  void check_files() {
    uint64_t total = 0;
    for (const auto& [name, items] : files_) {
      for (const Item& item : items)
        total += static_cast<uint64_t>(std::max<int64_t>(0, item.info->length));
    }
    ProgressBar progress("verify", total);
    for (auto& [name, items] : files_) {
      if (escapes(name)) {
        problem(name, items.front().index->fqn,
                "the file is not inside the checkpoint directory; not read");
        continue;
      }
      std::unique_ptr<detail::RandomAccessData> file;
      try {
        file = detail::open_random_access(*files_io_, name);
      } catch (const c10::Error& error) {
        problem(name, std::nullopt, error.what_without_backtrace());
        continue;
      }
      if (!file) {
        std::string keys;
        for (std::size_t i = 0; i < items.size() && i < 5; ++i) {
          keys += (i ? ", '" : "'") + items[i].index->fqn + "'";
        }
        if (items.size() > 5) keys += ", ...";
        problem(name, items.front().index->fqn,
                "missing: the file holding " + std::to_string(items.size()) + " item(s) (" + keys +
                    ") does not exist");
        continue;
      }
      check_file(name, *file, items, progress);
    }
  }

  struct Item {
    const MetadataIndex* index;
    const StorageInfo* info;
    const ChunkStorageMetadata* chunk;  // null for values
    int zstd_layers = 0;                // nested zstd frames around the archive
  };

  // A safetensors blob of a data file, or the problem that its header has.
  struct Blob {
    std::optional<detail::SafetensorsBlob> blob;
    std::string problem;
    bool counted = false;  // its range has been accounted for
  };

  void check_file(const std::string& name, const detail::RandomAccessData& file,
                  std::vector<Item>& items, ProgressBar& progress) {
    const uint64_t size = file.size();
    std::sort(items.begin(), items.end(),
              [](const Item& a, const Item& b) { return a.info->offset < b.info->offset; });
    uint64_t end_of_previous = 0;
    std::map<uint64_t, Blob> blobs;
    for (const Item& item : items) {
      const std::string& key = item.index->fqn;
      const int64_t offset = item.info->offset;
      const int64_t length = item.info->length;
      const std::string range =
          "[" + std::to_string(offset) + ", " + std::to_string(offset + length) + ")";
      if (offset < 0 || length < 0) {
        problem(name, key, "the item has a negative offset or length");
        continue;
      }
      const uint64_t begin = static_cast<uint64_t>(offset);
      uint64_t end = begin + static_cast<uint64_t>(length);
      if (end > size) {
        problem(name, key,
                "truncated: the item at bytes " + range + " ends past the end of the " +
                    std::to_string(size) + "-byte file");
        continue;
      }
      Blob* blob = nullptr;
      if (is_safetensors(name, file, item)) {
        auto found = blobs.find(begin);
        if (found == blobs.end()) {
          found = blobs.emplace(begin, Blob{}).first;
          try {
            found->second.blob = detail::read_safetensors_blob(file, begin, "data file " + name);
          } catch (const c10::Error& error) {
            found->second.problem = error.what_without_backtrace();
          }
        }
        blob = &found->second;
        if (blob->counted) {
          // Its tensors share the blob, whose range is accounted for already.
          check_blob_item(name, file, item, *blob);
          progress.advance(static_cast<uint64_t>(length), key);
          continue;
        }
        blob->counted = true;
        if (blob->blob) end = std::max(end, blob->blob->end());
      }
      if (begin < end_of_previous) {
        problem(name, key, "the item at bytes " + range + " overlaps the item before it");
      } else if (begin > end_of_previous) {
        problem(name, std::nullopt,
                "bytes [" + std::to_string(end_of_previous) + ", " + std::to_string(begin) +
                    ") belong to no item");
      }
      end_of_previous = std::max(end_of_previous, end);
      if (blob != nullptr) {
        check_blob_item(name, file, item, *blob);
      } else {
        check_item(name, file, item);
      }
      progress.advance(static_cast<uint64_t>(length), key);
    }
    if (end_of_previous < size) {
      problem(name, std::nullopt,
              "bytes [" + std::to_string(end_of_previous) + ", " + std::to_string(size) +
                  ") after the last item belong to no item");
    }
  }

  // The format's own checks: the archive's layout and every record's CRC-32.
  void check_format(const detail::ZipBlobReader& zip) {
    detail::check_pytorch_layout(zip);
    for (const detail::ZipRecordInfo& record : zip.records()) {
      zip.check_crc(record);
      bytes_read_ += record.size;
    }
  }

  // One problem at most per item (check_checksum_coverage reports items the checksum file lacks).
  // Against the checksum file when it lists the item: when every byte matches, the archive is as
  // written and only what it says is left to check; when not, the format's checks say, when they
  // can, which part is damaged.
  // A tensor item of DCP's SAFETENSORS format: not compressed, not listed in a checksum file
  // (dcpp writes none), and not starting with a zip or zstd header.
  bool is_safetensors(const std::string& name, const detail::RandomAccessData& file,
                      const Item& item) const {
    if (item.chunk == nullptr || item.zstd_layers > 0) return false;
    if (checksums_ && checksums_->find(name, static_cast<uint64_t>(item.info->offset)) != nullptr) {
      return false;
    }
    try {
      return detail::sniff_stored_layout(file, static_cast<uint64_t>(item.info->offset)) ==
             detail::StoredLayout::kSafetensors;
    } catch (const c10::Error&) {
      return false;  // check_item reports the read error
    }
  }

  // A tensor of a safetensors blob: the blob's header intact, its entry matching `.metadata`, its
  // bytes readable.
  void check_blob_item(const std::string& name, const detail::RandomAccessData& file,
                       const Item& item, const Blob& blob) {
    const std::string& key = item.index->fqn;
    if (!blob.blob) {
      problem(name, key, blob.problem);
      return;
    }
    const std::string where = "data file " + name + ", key '" + key + "'";
    try {
      const detail::SafetensorsTensor& entry = detail::find_safetensors_chunk(
          *blob.blob, key, tensors_.at(key)->properties.dtype, *item.chunk,
          static_cast<uint64_t>(item.info->length), where);
      const detail::FileRangeSource data(
          file, blob.blob->offset + blob.blob->header.data_start + entry.begin,
          entry.end - entry.begin, where);
      detail::source_crc32(data);  // every byte readable
      bytes_read_ += data.size();
    } catch (const c10::Error& error) {
      problem(name, key, error.what_without_backtrace());
    }
  }

  void check_item(const std::string& name, const detail::RandomAccessData& file, const Item& item) {
    const std::string& key = item.index->fqn;
    const std::string where = "data file " + name + ", key '" + key + "'" +
                              (item.zstd_layers > 0 ? " (zstd-compressed)" : "");
    std::optional<std::string> mismatch;
    bool intact = false;
    try {
      const detail::FileRangeSource stored(file, static_cast<uint64_t>(item.info->offset),
                                           static_cast<uint64_t>(item.info->length), where);
      const detail::ItemChecksum* expected =
          checksums_ ? checksums_->find(name, static_cast<uint64_t>(item.info->offset)) : nullptr;
      const bool listed =
          expected != nullptr && expected->length == static_cast<uint64_t>(item.info->length);
      // A compressed item: its archive, decompressed within the reader's bound; the checksum
      // file's CRC-32 covers the stored bytes, computed as they are decompressed.
      detail::ZstdOutput archive;
      std::unique_ptr<detail::MemorySource> decompressed;
      uint32_t stored_crc = 0;
      if (item.zstd_layers > 0) {
        const uint64_t bound = item.chunk != nullptr
                                   ? detail::tensor_archive_bound(
                                         tensors_.at(key)->properties.dtype, item.chunk->sizes)
                                   : FileSystemReaderOptions{}.max_decompressed_value_size;
        try {
          archive = detail::zstd_decompress_bounded(stored, item.zstd_layers, bound, &stored_crc);
        } catch (const c10::Error&) {
          // A damaged frame: say so against the checksum file first when it lists the item.
          if (listed) {
            const uint32_t crc = detail::source_crc32(stored);
            if (crc != expected->crc32)
              mismatch = detail::item_mismatch_message(where, *expected, crc);
          }
          throw;
        }
        bytes_read_ += stored.size();
        decompressed = std::make_unique<detail::MemorySource>(archive.view(), where);
      }
      const detail::ByteSource& source =
          decompressed ? static_cast<const detail::ByteSource&>(*decompressed) : stored;
      if (listed) {
        const uint32_t crc = decompressed ? stored_crc : detail::source_crc32(stored);
        if (!decompressed) bytes_read_ += stored.size();
        intact = crc == expected->crc32;
        if (!intact) mismatch = detail::item_mismatch_message(where, *expected, crc);
      }
      const detail::ZipBlobReader zip(source);
      if (!intact) check_format(zip);
      if (item.chunk == nullptr) {
        detail::read_bytes_item(source, false);
      } else {
        detail::check_tensor_item(zip, tensors_.at(key)->properties.dtype, item.chunk->sizes,
                                  false);
      }
    } catch (const c10::Error& error) {
      std::string found = error.what_without_backtrace();
      if (mismatch && found.rfind(where + ": ", 0) == 0) found.erase(0, where.size() + 2);
      problem(name, key, mismatch ? *mismatch + " (" + found + ")" : found);
      return;
    }
    if (mismatch) problem(name, key, *mismatch);
  }

  void check_unreferenced() {
    std::vector<std::string> names;
    try {
      names = files_io_->list();
    } catch (const c10::Error& error) {
      problem(std::nullopt, std::nullopt, error.what_without_backtrace());
    }
    for (const std::string& name : names) {
      if (detail::is_data_file_name(name) && files_.count(name) == 0) {
        problem(name, std::nullopt, "unreferenced: no item of .metadata lies in this data file");
      }
    }
  }

  std::string location_;  // a directory or an s3:// URL
  fs::path directory_;    // the same, for the per-rank files of a directory
  std::unique_ptr<LocationFiles> files_io_;
  bool in_store_;                          // not a directory: an s3:// or a registered driver's
  std::string checksum_state_ = "absent";  // "absent", "checked" or "unusable"
  std::optional<std::string> integrity_state_;  // Megatron's integrity.json: "checked", "failed"
  bool megatron_config_ok_ = true;              // Megatron's metadata.json, when there is one
  std::optional<detail::ItemChecksumIndex> checksums_;
  std::size_t listed_items_ = 0;  // items the checksum file lists for this .metadata
  Metadata metadata_;
  // The items whose bytes are checked: `.metadata`'s, or every rank's of a per-rank checkpoint
  // (where the merged metadata keeps one copy of a replica, each rank's file holds its own).
  std::vector<std::pair<MetadataIndex, StorageInfo>> items_;
  std::vector<std::string> metadata_files_;  // a per-rank checkpoint's `__<r>.metadata` files
  std::set<std::string> files_without_checksums_;
  std::map<std::string, const TensorStorageMetadata*> tensors_;
  std::set<std::string> values_;
  std::map<std::string, std::vector<Item>> files_;
  json problems_ = json::array();
  uint64_t bytes_read_ = 0;
};

}  // namespace

json verify_checkpoint(const fs::path& checkpoint) {
  if (checkpoint_layout(checkpoint)->name() == kHuggingFaceLayout) {
    return verify_huggingface_directory(checkpoint);
  }
  return Verifier(checkpoint.string()).run();
}

void print_verification(const json& report, std::ostream& out) {
  for (const json& p : report["problems"]) {
    out << "problem:";
    if (!p["file"].is_null()) out << " file " << p["file"].get<std::string>();
    if (!p["key"].is_null()) {
      out << (p["file"].is_null() ? " key '" : ", key '") << p["key"].get<std::string>() << "'";
    }
    out << ": " << p["problem"].get<std::string>() << "\n";
  }
  const std::size_t count = report["problems"].size();
  out << (count == 0 ? "ok: " : "failed: ") << report["checkpoint"].get<std::string>() << ": "
      << report["entries"].get<int64_t>() << " entries, " << report["items"].get<int64_t>()
      << " items in " << report["files"].get<int64_t>() << " files, "
      << human_bytes(report["bytes_read"].get<uint64_t>()) << " read";
  if (count == 0 && report.value("format", "") == "huggingface") {
    out << ", every header and data range checks out (safetensors carry no checksums)\n";
  } else if (count == 0) {
    const std::string checksums = report.value("checksum_file", "absent");
    out << ", every CRC-32 matches"
        << (checksums == "checked" ? " (checksum file included)\n"
                                   : " (no checksum file: zip CRC-32s and layout only)\n");
  } else {
    out << ", " << count << (count == 1 ? " problem\n" : " problems\n");
  }
}

void add_verify_command(CLI::App& app) {
  auto* command = app.add_subcommand(
      "verify", "Read every byte of a checkpoint and check it against .metadata and its CRC-32s");
  auto checkpoint = std::make_shared<std::string>();
  auto as_json = std::make_shared<bool>(false);
  auto step = std::make_shared<int64_t>(0);
  command
      ->add_option("CKPT", *checkpoint,
                   "Checkpoint directory (DCP, Megatron-Core or Hugging Face), s3://BUCKET/PREFIX, "
                   "a CheckpointManager's root (every committed checkpoint under it), or a "
                   "Megatron-LM save directory (the iteration its tracker names)")
      ->required();
  auto* step_option =
      command->add_option("--step", *step,
                          "With a manager's root: verify that step's only; with a Megatron-LM "
                          "save directory: that iteration");
  command->add_flag("--json", *as_json, "Print one JSON object instead of a report");
  command->callback([=] {
    const bool directory = Location(*checkpoint).is_directory();
    const bool root = directory && is_manager_root(*checkpoint);
    const bool megatron_lm = directory && !root && is_megatron_lm_root(*checkpoint);
    const std::optional<int64_t> given =
        step_option->count() > 0 ? std::optional<int64_t>(*step) : std::nullopt;
    if (given && !root && !megatron_lm) {
      throw CheckpointError(ErrorKind::kUsage,
                            "--step applies to a CheckpointManager's root (its step-N "
                            "directories) or a Megatron-LM save directory (its iter_NNNNNNN "
                            "directories); " +
                                *checkpoint + " is one checkpoint: verify it without --step");
    }
    json report;
    if (root) {
      report = verify_manager_root(*checkpoint, given);
    } else if (megatron_lm) {
      const MegatronLmCheckpoint iteration = megatron_lm_checkpoint(*checkpoint, given);
      report = verify_checkpoint(iteration.directory);
      report["megatron_lm_root"] = iteration.to_json(*checkpoint);
    } else {
      report = verify_checkpoint(*checkpoint);
    }
    if (*as_json) {
      // Keys and names may hold any bytes (a damaged .metadata): not valid UTF-8 is replaced.
      std::cout << report.dump(1, ' ', false, json::error_handler_t::replace) << "\n";
    } else if (root) {
      print_manager_root_verification(report, std::cout);
    } else {
      print_verification(report, std::cout);
    }
    std::cout.flush();
    if (!report["ok"].get<bool>()) throw CLI::RuntimeError(1);
  });
}

}  // namespace dcpp::tools
