#pragma once
// Which part of a box no saved chunk covers: for the load planner's message when a checkpoint
// lacks part of a tensor being loaded (a per-rank checkpoint missing a rank, an incomplete save).

#include <dcpp/format/metadata.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace dcpp::detail {

/// The elements of a box that no chunk covers: their bounding box (global coordinates) and count.
struct UncoveredRegion {
  std::vector<int64_t> offsets;
  std::vector<int64_t> sizes;
  int64_t elements = 0;
};

/// The uncovered part of the box [offsets, offsets + sizes) given `chunks` (global coordinates);
/// nullopt when every element is covered, or when the chunks cut the box into too many cells to
/// enumerate (more than about 2^26 cell-chunk tests). Does not block; pure.
std::optional<UncoveredRegion> uncovered_region(const std::vector<int64_t>& offsets,
                                                const std::vector<int64_t>& sizes,
                                                const std::vector<ChunkStorageMetadata>& chunks);

/// "rows 8..10 x columns 0..2"-style text of a region: "[8:11, 0:3]" (Python slices, end excluded).
std::string region_string(const std::vector<int64_t>& offsets, const std::vector<int64_t>& sizes);

}  // namespace dcpp::detail
