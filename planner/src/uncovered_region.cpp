// The box is cut into cells along every chunk boundary that crosses it; each cell lies wholly
// inside or wholly outside each chunk, so testing one corner per cell is exact.

#include "uncovered_region.h"

#include <algorithm>
#include <limits>

namespace dcpp::detail {

namespace {

constexpr uint64_t kMaxTests = uint64_t{1} << 26;

}  // namespace

std::optional<UncoveredRegion> uncovered_region(const std::vector<int64_t>& offsets,
                                                const std::vector<int64_t>& sizes,
                                                const std::vector<ChunkStorageMetadata>& chunks) {
  const std::size_t dims = offsets.size();
  std::vector<const ChunkStorageMetadata*> usable;
  for (const ChunkStorageMetadata& chunk : chunks) {
    if (chunk.offsets.size() == dims && chunk.sizes.size() == dims) usable.push_back(&chunk);
  }
  for (const int64_t size : sizes) {
    if (size <= 0) return std::nullopt;  // no elements: nothing to cover
  }
  std::vector<std::vector<int64_t>> cuts(dims);
  uint64_t cells = 1;
  for (std::size_t d = 0; d < dims; ++d) {
    const int64_t begin = offsets[d], end = offsets[d] + sizes[d];
    cuts[d] = {begin, end};
    for (const ChunkStorageMetadata* chunk : usable) {
      for (const int64_t at : {chunk->offsets[d], chunk->offsets[d] + chunk->sizes[d]}) {
        if (at > begin && at < end) cuts[d].push_back(at);
      }
    }
    std::sort(cuts[d].begin(), cuts[d].end());
    cuts[d].erase(std::unique(cuts[d].begin(), cuts[d].end()), cuts[d].end());
    cells *= cuts[d].size() - 1;
    if (cells * std::max<uint64_t>(usable.size(), 1) > kMaxTests) return std::nullopt;
  }
  std::vector<int64_t> low(dims, std::numeric_limits<int64_t>::max());
  std::vector<int64_t> high(dims, std::numeric_limits<int64_t>::min());
  int64_t missing = 0;
  std::vector<std::size_t> cell(dims);
  for (uint64_t n = 0; n < cells; ++n) {
    uint64_t rest = n;  // cell n's coordinates, last dimension fastest
    for (std::size_t d = dims; d-- > 0;) {
      const uint64_t count = cuts[d].size() - 1;
      cell[d] = static_cast<std::size_t>(rest % count);
      rest /= count;
    }
    const bool covered = std::any_of(usable.begin(), usable.end(), [&](const auto* chunk) {
      for (std::size_t d = 0; d < dims; ++d) {
        const int64_t at = cuts[d][cell[d]];
        if (at < chunk->offsets[d] || at >= chunk->offsets[d] + chunk->sizes[d]) return false;
      }
      return true;
    });
    if (!covered) {
      int64_t volume = 1;
      for (std::size_t d = 0; d < dims; ++d) {
        low[d] = std::min(low[d], cuts[d][cell[d]]);
        high[d] = std::max(high[d], cuts[d][cell[d] + 1]);
        volume *= cuts[d][cell[d] + 1] - cuts[d][cell[d]];
      }
      missing += volume;
    }
  }
  if (missing == 0) return std::nullopt;
  UncoveredRegion region;
  region.elements = missing;
  region.offsets = low;
  for (std::size_t d = 0; d < dims; ++d) region.sizes.push_back(high[d] - low[d]);
  return region;
}

std::string region_string(const std::vector<int64_t>& offsets, const std::vector<int64_t>& sizes) {
  std::string out = "[";
  for (std::size_t d = 0; d < offsets.size(); ++d) {
    out +=
        (d ? ", " : "") + std::to_string(offsets[d]) + ":" + std::to_string(offsets[d] + sizes[d]);
  }
  return out + "]";
}

}  // namespace dcpp::detail
