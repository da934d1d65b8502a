#include "planner/saved_chunk_overlap.h"

#include "core/shape_string.h"
#include "state_dict/box.h"

#include <dcpp/core/checkpoint_error.h>

#include <vector>

namespace dcpp::detail {

namespace {

// The data file `.metadata` gives chunk `position` of `key` (at `offsets`): the entry whose index
// hint is `position` if one is, else the first at those offsets; "" when none is listed. A linear
// scan, for the error message only.
std::string data_file_of(const Metadata& metadata, const std::string& key,
                         const std::vector<int64_t>& offsets, std::size_t position) {
  const std::string* first = nullptr;
  for (const auto& [index, info] : metadata.storage_data) {
    if (index.fqn != key || !index.offset || *index.offset != offsets) continue;
    if (index.index == static_cast<int64_t>(position)) return info.relative_path;
    if (first == nullptr) first = &info.relative_path;
  }
  return first == nullptr ? std::string() : *first;
}

std::string describe(const Metadata& metadata, const std::string& key,
                     const std::vector<ChunkStorageMetadata>& chunks, std::size_t position) {
  const ChunkStorageMetadata& chunk = chunks[position];
  const std::string file = data_file_of(metadata, key, chunk.offsets, position);
  return "the saved chunk at offsets " + shape_string(chunk.offsets) + " of sizes " +
         shape_string(chunk.sizes) + " (chunk " + std::to_string(position) +
         (file.empty() ? ", in no data file" : ", in " + file) + ")";
}

}  // namespace

void check_saved_chunks_disjoint(const std::string& key, const TensorStorageMetadata& tensor,
                                 const Metadata& metadata) {
  const std::vector<ChunkStorageMetadata>& chunks = tensor.chunks;
  const std::size_t dims = tensor.size.size();
  std::vector<BoxView> boxes;
  boxes.reserve(chunks.size());
  for (std::size_t c = 0; c < chunks.size(); ++c) {
    if (chunks[c].offsets.size() != dims || chunks[c].sizes.size() != dims) {
      throw CheckpointError(ErrorKind::kCorrupt,
                            "key '" + key + "': saved chunk " + std::to_string(c) + " has " +
                                std::to_string(chunks[c].offsets.size()) +
                                " dimensions, the tensor " + std::to_string(dims) +
                                "; the checkpoint's .metadata is inconsistent");
    }
    boxes.push_back(BoxView{chunks[c].offsets, chunks[c].sizes});
  }
  if (const auto pair = first_overlap(boxes)) {
    throw CheckpointError(
        ErrorKind::kCorrupt,
        "key '" + key + "': " + describe(metadata, key, chunks, pair->first) + " overlaps " +
            describe(metadata, key, chunks, pair->second) +
            " in the checkpoint's .metadata. A save writes each part of a tensor once, so this "
            ".metadata is damaged or was written by a faulty tool, and part of the tensor may be "
            "in no chunk: run `dcpp verify` on the checkpoint, then load an intact copy or save "
            "it again (or leave this key out of the state dict)");
  }
}

}  // namespace dcpp::detail
