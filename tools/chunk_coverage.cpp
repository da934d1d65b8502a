#include "chunk_coverage.h"

#include <algorithm>
#include <numeric>

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

bool is_empty(const ChunkStorageMetadata& chunk) {
  return std::any_of(chunk.sizes.begin(), chunk.sizes.end(), [](int64_t s) { return s == 0; });
}

bool overlap(const ChunkStorageMetadata& a, const ChunkStorageMetadata& b) {
  if (is_empty(a) || is_empty(b)) return false;
  for (std::size_t d = 0; d < a.offsets.size(); ++d) {
    if (a.offsets[d] >= b.offsets[d] + b.sizes[d] || b.offsets[d] >= a.offsets[d] + a.sizes[d]) {
      return false;
    }
  }
  return true;
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
      inside = inside && offset >= 0 && size >= 0 && offset <= shape[d] && size <= shape[d] - offset;
      volume *= static_cast<Volume>(std::max<int64_t>(size, 0));
    }
    if (!inside) {
      problems.push_back(box_string(chunk) + " reaches outside the tensor");
      continue;
    }
    covered += volume;
    valid.push_back(&chunk);
  }
  // Sorted by the first offset, a chunk can only overlap the ones that start before it ends.
  if (shape.empty()) {
    if (valid.size() > 1) problems.push_back("the 0-d tensor has " + std::to_string(valid.size()) +
                                             " chunks, which overlap");
  } else {
    std::sort(valid.begin(), valid.end(), [](const auto* a, const auto* b) {
      return a->offsets[0] < b->offsets[0];
    });
    for (std::size_t i = 0; i < valid.size(); ++i) {
      const int64_t end = valid[i]->offsets[0] + valid[i]->sizes[0];
      for (std::size_t j = i + 1; j < valid.size() && valid[j]->offsets[0] < end; ++j) {
        if (overlap(*valid[i], *valid[j])) {
          problems.push_back(box_string(*valid[i]) + " overlaps the " + box_string(*valid[j]));
        }
      }
    }
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
