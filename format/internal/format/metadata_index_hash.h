#pragma once
// Hashing a MetadataIndex where it lies (in a plan's item), without copying it: the key and the
// chunk offsets, as MetadataIndex::operator== compares them.

#include <dcpp/format/metadata.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string_view>

namespace dcpp::detail {

struct MetadataIndexHash {
  std::size_t operator()(const MetadataIndex* index) const {
    std::size_t h = std::hash<std::string_view>{}(index->fqn);
    if (index->offset) {
      for (int64_t offset : *index->offset) {
        h = h * 1000003u ^ std::hash<int64_t>{}(offset);
      }
    } else {
      h = ~h;
    }
    return h;
  }
};

struct MetadataIndexEqual {
  bool operator()(const MetadataIndex* a, const MetadataIndex* b) const { return *a == *b; }
};

}  // namespace dcpp::detail
