#include <dcpp/format/metadata_selection.h>

#include "state_dict/box.h"

namespace dcpp {

void MetadataSelection::add_box(const std::string& key, std::vector<int64_t> offsets,
                                std::vector<int64_t> sizes) {
  boxes_[key].push_back(Box{std::move(offsets), std::move(sizes)});
}

const std::vector<MetadataSelection::Box>* MetadataSelection::boxes_of(
    std::string_view key) const {
  const auto found = boxes_.find(key);
  return found == boxes_.end() ? nullptr : &found->second;
}

bool MetadataSelection::keeps(const std::vector<Box>* boxes, const ChunkStorageMetadata& chunk) {
  for (const int64_t size : chunk.sizes) {
    if (size == 0) return true;  // holds no element, and costs nothing to keep
  }
  if (boxes == nullptr) return true;
  for (const Box& box : *boxes) {
    if (box.offsets.size() == chunk.offsets.size() && box.sizes.size() == chunk.sizes.size() &&
        detail::boxes_overlap({chunk.offsets, chunk.sizes}, {box.offsets, box.sizes})) {
      return true;
    }
  }
  return false;
}

}  // namespace dcpp
