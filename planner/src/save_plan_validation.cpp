#include "planner/save_plan_validation.h"

#include "core/bounded_list.h"
#include "core/shape_string.h"
#include "format/metadata_index_hash.h"
#include "state_dict/box.h"

#include <dcpp/core/checkpoint_error.h>

#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>

namespace dcpp::detail {

namespace {

struct PlacedChunk {
  const TensorWriteData* data;
  std::size_t rank;
};

std::string describe(const PlacedChunk& chunk) {
  return "the chunk at offsets " + shape_string(chunk.data->chunk.offsets) + " of sizes " +
         shape_string(chunk.data->chunk.sizes) + " from rank " + std::to_string(chunk.rank);
}

// Throws when two of `chunks` give their tensor another dtype or shape.
void check_agreement(const std::string& key, const std::vector<PlacedChunk>& chunks) {
  const TensorWriteData& first = *chunks.front().data;
  for (const PlacedChunk& chunk : chunks) {
    const TensorWriteData& data = *chunk.data;
    if (data.size != first.size || data.properties.dtype != first.properties.dtype) {
      throw CheckpointError(
          ErrorKind::kUsage,
          "key '" + key + "': rank " + std::to_string(chunks.front().rank) + " has a " +
              c10::toString(first.properties.dtype) + " tensor of shape " +
              shape_string(first.size) + ", rank " + std::to_string(chunk.rank) + " a " +
              c10::toString(data.properties.dtype) + " tensor of shape " + shape_string(data.size) +
              "; every rank must describe the same tensor");
    }
  }
}

void validate_tensor(const std::string& key, const std::vector<PlacedChunk>& chunks,
                     bool require_cover) {
  check_agreement(key, chunks);
  const TensorWriteData& first = *chunks.front().data;
  int64_t numel = 1;
  for (int64_t s : first.size) {
    numel *= s;
  }
  int64_t covered = 0;
  std::vector<BoxView> boxes;  // every chunk, once each lies inside the tensor
  boxes.reserve(chunks.size());
  for (std::size_t i = 0; i < chunks.size(); ++i) {
    const TensorWriteData& data = *chunks[i].data;
    const ChunkStorageMetadata& chunk = data.chunk;
    if (!detail::box_lies_inside(chunk.offsets, chunk.sizes, first.size)) {
      throw CheckpointError(ErrorKind::kUsage, "key '" + key + "': " + describe(chunks[i]) +
                                                   " lies outside the tensor's shape " +
                                                   shape_string(first.size));
    }
    int64_t volume = 1;
    for (const int64_t size : chunk.sizes) volume *= size;
    covered += volume;
    boxes.push_back(BoxView{chunk.offsets, chunk.sizes});
  }
  if (const auto pair = first_overlap(boxes)) {
    throw CheckpointError(ErrorKind::kUsage,
                          "key '" + key + "': " + describe(chunks[pair->second]) + " overlaps " +
                              describe(chunks[pair->first]) +
                              "; shards of a tensor must not overlap unless they are equal "
                              "(replicas)");
  }
  if (require_cover && covered != numel) {
    const std::string ranks =
        bounded_list(chunks, [](const PlacedChunk& chunk) { return std::to_string(chunk.rank); });
    throw CheckpointError(ErrorKind::kUsage, "key '" + key + "': the chunks of ranks " + ranks +
                                                 " cover " + std::to_string(covered) + " of the " +
                                                 std::to_string(numel) + " elements of shape " +
                                                 shape_string(first.size) +
                                                 "; some rank is missing its shard");
  }
}

// A replica is a chunk of the same key at the same offsets with the same sizes: equal boxes. Two
// chunks at one offset with different sizes overlap, and validate_tensor refuses them.
struct SameChunkHash {
  std::size_t operator()(const WriteItem* item) const {
    return MetadataIndexHash{}(&item->index);  // equal boxes have equal offsets
  }
};
struct SameChunk {
  bool operator()(const WriteItem* a, const WriteItem* b) const {
    return a->index == b->index && a->tensor_data->chunk.sizes == b->tensor_data->chunk.sizes;
  }
};

// Every tensor's chunks in `plans`, grouped by key, keys in the order first planned (views of the
// plans' keys); with `skip_replicas`, a chunk equal to one listed before for its key (same offsets
// and sizes) is left out.
std::vector<std::pair<const std::string*, std::vector<PlacedChunk>>> chunks_by_key(
    const std::vector<SavePlan>& plans, bool skip_replicas) {
  std::unordered_map<std::string_view, std::size_t> group_of;
  std::unordered_set<const WriteItem*, SameChunkHash, SameChunk> seen;
  std::vector<std::pair<const std::string*, std::vector<PlacedChunk>>> tensors;
  for (std::size_t rank = 0; rank < plans.size(); ++rank) {
    for (const WriteItem& item : plans[rank].items) {
      if (!item.tensor_data || (skip_replicas && !seen.insert(&item).second)) continue;
      auto [it, added] = group_of.try_emplace(item.index.fqn, tensors.size());
      if (added) {
        tensors.emplace_back(&item.index.fqn, std::vector<PlacedChunk>{});
      }
      tensors[it->second].second.push_back(PlacedChunk{&*item.tensor_data, rank});
    }
  }
  return tensors;
}

}  // namespace

void validate_global_save_plan(const std::vector<SavePlan>& plans) {
  for (const auto& [key, chunks] : chunks_by_key(plans, /*skip_replicas=*/false)) {
    validate_tensor(*key, chunks, plans.size() > 1);
  }
}

void validate_tensor_access(const std::vector<SavePlan>& plans) {
  // Replicas agree on the dtype and shape (checked on every chunk), and count once in the tiling.
  for (const auto& [key, chunks] : chunks_by_key(plans, /*skip_replicas=*/false)) {
    check_agreement(*key, chunks);
  }
  for (const auto& [key, chunks] : chunks_by_key(plans, /*skip_replicas=*/true)) {
    validate_tensor(*key, chunks, /*require_cover=*/true);
  }
}

}  // namespace dcpp::detail
