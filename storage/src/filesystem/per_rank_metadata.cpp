// Reading and merging the per-rank metadata files of a checkpoint saved without collectives
// (design note in per_rank_metadata.h).

#include "storage/per_rank_metadata.h"

#include "core/shape_string.h"
#include "dcp_item_lengths.h"
#include "format/file_io.h"
#include "format/metadata_pickle.h"
#include "state_dict/box.h"

#include <dcpp/core/checkpoint_error.h>

#include <algorithm>
#include <map>
#include <set>
#include <unordered_map>

namespace dcpp::detail {

namespace fs = std::filesystem;

namespace {

bool same_properties(const TensorProperties& a, const TensorProperties& b) {
  return a.dtype == b.dtype && a.layout == b.layout && a.requires_grad == b.requires_grad &&
         a.memory_format == b.memory_format && a.pin_memory == b.pin_memory;
}

std::string chunk_string(const ChunkStorageMetadata& chunk) {
  return "the chunk at offsets " + shape_string(chunk.offsets) + " of sizes " +
         shape_string(chunk.sizes);
}

[[noreturn]] void disagree(const std::string& key, const RankMetadata& a, const RankMetadata& b,
                           const std::string& what) {
  throw CheckpointError(
      ErrorKind::kCorrupt,
      "per-rank checkpoint: key '" + key + "': " + a.path + " (rank " + std::to_string(a.rank) +
          ") and " + b.path + " (rank " + std::to_string(b.rank) + ") disagree: " + what +
          "; these files do not belong to one checkpoint (a save that mixed jobs, or "
          "an overwrite that did not finish on every rank): save it again");
}

// One key of the merged view while it is built: where each chunk came from and where chunks
// lie by offsets.
struct MergedKey {
  std::size_t position = 0;  // in Metadata::state_dict_metadata
  const RankMetadata* first = nullptr;
  std::vector<const RankMetadata*> chunk_origin;
  std::map<std::vector<int64_t>, std::size_t> chunk_at;
};

void check_no_overlap(const std::string& key, const TensorStorageMetadata& tensor,
                      const MergedKey& merged) {
  const std::vector<ChunkStorageMetadata>& chunks = tensor.chunks;
  if (tensor.size.empty()) return;   // a 0-d tensor has one chunk: equal offsets were merged
  std::vector<std::size_t> of_rank;  // chunks of the tensor's rank (the load planner names others)
  std::vector<BoxView> boxes;
  for (std::size_t i = 0; i < chunks.size(); ++i) {
    if (chunks[i].offsets.size() == tensor.size.size() &&
        chunks[i].sizes.size() == tensor.size.size()) {
      of_rank.push_back(i);
      boxes.push_back(BoxView{chunks[i].offsets, chunks[i].sizes});
    }
  }
  if (const auto pair = first_overlap(boxes)) {
    const std::size_t a = of_rank[pair->first], b = of_rank[pair->second];
    disagree(key, *merged.chunk_origin[a], *merged.chunk_origin[b],
             chunk_string(chunks[a]) + " overlaps " + chunk_string(chunks[b]) +
                 " (saved shards may be equal replicas, never partly overlap)");
  }
}

}  // namespace

std::vector<int> find_rank_metadata_files(const fs::path& directory) {
  std::vector<int> ranks;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(directory, error)) {
    if (const std::optional<int> rank =
            parse_rank_metadata_file_name(entry.path().filename().string())) {
      ranks.push_back(*rank);
    }
  }
  std::sort(ranks.begin(), ranks.end());
  return ranks;
}

void check_rank_sequence(const fs::path& directory, const std::vector<int>& ranks) {
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    if (ranks[i] != static_cast<int>(i)) {
      throw CheckpointError(
          ErrorKind::kNotFound,
          "per-rank checkpoint " + directory.string() + " is incomplete: " +
              (directory / rank_metadata_file_name(static_cast<int>(i))).string() +
              " is missing, though " + rank_metadata_file_name(ranks[i]) +
              " exists (that rank's save did not finish, or its file was lost); restore it, or "
              "load an earlier checkpoint");
    }
  }
}

Metadata merge_rank_metadata(const std::vector<RankMetadata>& ranks) {
  if (ranks.empty()) {
    throw CheckpointError(ErrorKind::kNotFound,
                          "per-rank checkpoint: no __<rank>.metadata to merge");
  }
  Metadata merged;
  std::unordered_map<std::string, MergedKey> keys;
  for (const RankMetadata& rank : ranks) {
    for (const auto& [key, stored] : rank.metadata.state_dict_metadata) {
      auto [it, added] = keys.try_emplace(key);
      MergedKey& entry = it->second;
      const auto* tensor = std::get_if<TensorStorageMetadata>(&stored);
      if (added) {
        entry.position = merged.state_dict_metadata.size();
        entry.first = &rank;
        merged.state_dict_metadata.emplace_back(
            key, tensor
                     ? StorageMetadata(TensorStorageMetadata{tensor->properties, tensor->size, {}})
                     : StorageMetadata(BytesStorageMetadata{}));
      }
      StorageMetadata& into = merged.state_dict_metadata[entry.position].second;
      auto* merged_tensor = std::get_if<TensorStorageMetadata>(&into);
      if ((tensor != nullptr) != (merged_tensor != nullptr)) {
        disagree(key, *entry.first, rank,
                 "it is a tensor in one and a non-tensor value in the other");
      }
      if (tensor == nullptr) continue;
      if (!same_properties(tensor->properties, merged_tensor->properties) ||
          tensor->size != merged_tensor->size) {
        disagree(key, *entry.first, rank,
                 "one holds a " + std::string(c10::toString(merged_tensor->properties.dtype)) +
                     " tensor of global shape " + shape_string(merged_tensor->size) +
                     ", the other a " + c10::toString(tensor->properties.dtype) +
                     " tensor of global shape " + shape_string(tensor->size) +
                     (tensor->size == merged_tensor->size &&
                              tensor->properties.dtype == merged_tensor->properties.dtype
                          ? " with other tensor properties (layout, requires_grad, memory format "
                            "or pin_memory)"
                          : ""));
      }
      for (const ChunkStorageMetadata& chunk : tensor->chunks) {
        auto existing = entry.chunk_at.find(chunk.offsets);
        if (existing != entry.chunk_at.end()) {
          const ChunkStorageMetadata& other = merged_tensor->chunks[existing->second];
          if (other.sizes != chunk.sizes) {
            disagree(
                key, *entry.chunk_origin[existing->second], rank,
                chunk_string(other) + " is also saved with sizes " + shape_string(chunk.sizes));
          }
          continue;  // a replica: kept once, read from the lowest rank
        }
        entry.chunk_at.emplace(chunk.offsets, merged_tensor->chunks.size());
        entry.chunk_origin.push_back(&rank);
        merged_tensor->chunks.push_back(chunk);
      }
    }
  }
  for (const auto& [key, stored] : merged.state_dict_metadata) {
    if (const auto* tensor = std::get_if<TensorStorageMetadata>(&stored)) {
      check_no_overlap(key, *tensor, keys.at(key));
    }
  }

  // Items: the lowest rank's copy of each, with the index hint of the merged chunk list.
  std::set<MetadataIndex> seen;
  for (const RankMetadata& rank : ranks) {
    for (const auto& [index, info] : rank.metadata.storage_data) {
      if (!seen.insert(index).second) continue;
      MetadataIndex hinted = index;
      hinted.index.reset();
      auto key = keys.find(index.fqn);
      if (index.offset && key != keys.end()) {
        auto chunk = key->second.chunk_at.find(*index.offset);
        if (chunk != key->second.chunk_at.end()) {
          hinted.index = static_cast<int64_t>(chunk->second);
        }
      }
      merged.storage_data.emplace_back(std::move(hinted), info);
    }
  }

  std::unordered_map<std::string, const RankMetadata*> path_from;
  std::unordered_map<std::string, std::size_t> path_at;
  for (const RankMetadata& rank : ranks) {
    for (const auto& [key, path] : rank.metadata.planner_data) {
      auto [it, added] = path_at.try_emplace(key, merged.planner_data.size());
      if (added) {
        path_from.emplace(key, &rank);
        merged.planner_data.emplace_back(key, path);
      } else if (merged.planner_data[it->second].second != path) {
        disagree(key, *path_from.at(key), rank,
                 "they give the key different object paths (planner_data): '" +
                     join_path(merged.planner_data[it->second].second) + "' and '" +
                     join_path(path) + "'");
      }
    }
  }
  merged.storage_meta = ranks.front().metadata.storage_meta;
  merged.version = ranks.front().metadata.version;
  return merged;
}

PerRankCheckpoint read_per_rank_checkpoint(const fs::path& directory, const std::vector<int>& ranks,
                                           bool verify_checksums) {
  check_rank_sequence(directory, ranks);
  PerRankCheckpoint checkpoint;
  std::vector<ItemChecksum> items;
  bool every_rank_listed = verify_checksums;
  for (const int rank : ranks) {
    const std::string name = rank_metadata_file_name(rank);
    const fs::path path = directory / name;
    const File file(path, File::Mode::kRead);
    std::string bytes(file.size(), '\0');
    file.read_exactly(0, bytes.data(), bytes.size());
    if (verify_checksums) {
      const std::optional<SaveChecksums> save =
          check_metadata_checksum(directory, bytes, name, rank_checksum_file_name(rank));
      if (save && save->items) {
        items.insert(items.end(), save->items->begin(), save->items->end());
      } else {
        every_rank_listed = false;
      }
    }
    Metadata decoded = decode_metadata(bytes, path.string());
    check_item_lengths(decoded, path.string());
    checkpoint.ranks.push_back(RankMetadata{rank, path.string(), std::move(decoded)});
  }
  checkpoint.merged = merge_rank_metadata(checkpoint.ranks);
  if (every_rank_listed) {
    checkpoint.checksums.emplace(items);
  }
  return checkpoint;
}

}  // namespace dcpp::detail
