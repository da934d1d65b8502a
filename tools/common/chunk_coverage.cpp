#include "common/chunk_coverage.h"

#include "state_dict/box.h"

#include <algorithm>

namespace dcpp::tools {

namespace {

std::string box_string(const ChunkStorageMetadata& chunk) {
  auto join = [](const std::vector<int64_t>& v) {
    std::string s = "[";
    for (std::size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
    return s + "]";
  };
  return "chunk at offsets " + join(chunk.offsets) + " of sizes " + join(chunk.sizes);
}

}  // namespace

std::vector<std::string> chunk_coverage_problems(const std::vector<int64_t>& shape,
                                                 const std::vector<ChunkStorageMetadata>& chunks) {
  std::vector<std::string> problems;
  std::vector<const ChunkStorageMetadata*> valid;
  using Volume = unsigned __int128;  // sums of chunk volumes cannot overflow
  Volume covered = 0;
  for (const ChunkStorageMetadata& chunk : chunks) {
    if (chunk.offsets.size() != shape.size() || chunk.sizes.size() != shape.size()) {
      problems.push_back(box_string(chunk) + " does not have the tensor's " +
                         std::to_string(shape.size()) + " dimensions");
      continue;
    }
    bool inside = true;
    Volume volume = 1;
    for (std::size_t d = 0; d < shape.size(); ++d) {
      const int64_t offset = chunk.offsets[d];
      const int64_t size = chunk.sizes[d];
      inside =
          inside && offset >= 0 && size >= 0 && offset <= shape[d] && size <= shape[d] - offset;
      volume *= static_cast<Volume>(std::max<int64_t>(size, 0));
    }
    if (!inside) {
      problems.push_back(box_string(chunk) + " reaches outside the tensor");
      continue;
    }
    covered += volume;
    valid.push_back(&chunk);
  }
  std::vector<detail::BoxView> boxes;
  for (const ChunkStorageMetadata* chunk : valid) boxes.push_back({chunk->offsets, chunk->sizes});
  if (const auto pair = detail::first_overlap(boxes)) {
    problems.push_back(box_string(*valid[pair->first]) + " overlaps the " +
                       box_string(*valid[pair->second]));
  }
  Volume total = 1;
  for (int64_t size : shape) total *= static_cast<Volume>(std::max<int64_t>(size, 0));
  if (problems.empty() && covered != total) {
    problems.push_back("the chunks cover " + std::to_string(static_cast<uint64_t>(covered)) +
                       " of the tensor's " + std::to_string(static_cast<uint64_t>(total)) +
                       " elements");
  }
  return problems;
}

}  // namespace dcpp::tools
