#include "planner/same_index_items.h"

#include "format/metadata_index_hash.h"

#include <dcpp/core/checkpoint_error.h>

#include <algorithm>
#include <string>

namespace dcpp::detail {

SameIndexItems find_same_index_items(const std::vector<SavePlan>& plans) {
  SameIndexItems found;
  std::size_t total = 0;
  for (const SavePlan& plan : plans) total += plan.items.size();
  if (total >= SameIndexItems::kAlone) {
    throw CheckpointError(ErrorKind::kUsage,
                          "checkpoint save: the ranks' plans hold " + std::to_string(total) +
                              " items, more than the 2^32 - 1 one save can number; save the "
                              "state in parts (several checkpoints), or with fewer, larger "
                              "chunks");
  }
  found.index_of.reserve(total);
  for (const SavePlan& plan : plans) {
    found.first_of_rank.push_back(static_cast<uint32_t>(found.index_of.size()));
    for (const WriteItem& item : plan.items) found.index_of.push_back(&item.index);
  }
  struct Entry {
    uint64_t hash;
    uint32_t number;
  };
  std::vector<Entry> entries;
  entries.reserve(total);
  for (uint32_t n = 0; n < total; ++n) {
    entries.push_back(Entry{MetadataIndexHash{}(found.index_of[n]), n});
  }
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return a.hash != b.hash ? a.hash < b.hash : a.number < b.number;
  });
  found.leader.assign(total, SameIndexItems::kAlone);
  std::vector<uint32_t> pending;  // a hash's items not yet grouped (more than one index: rare)
  for (std::size_t begin = 0, end = 0; begin < entries.size(); begin = end) {
    for (end = begin + 1; end < entries.size() && entries[end].hash == entries[begin].hash; ++end) {
    }
    if (end - begin == 1) continue;
    pending.clear();
    for (std::size_t e = begin; e < end; ++e) pending.push_back(entries[e].number);
    while (pending.size() > 1) {
      const uint32_t first = pending.front();
      std::size_t others = 0;
      std::size_t equal = 1;
      for (std::size_t k = 1; k < pending.size(); ++k) {
        if (*found.index_of[pending[k]] == *found.index_of[first]) {
          found.leader[pending[k]] = first;
          ++equal;
        } else {
          pending[others++] = pending[k];
        }
      }
      if (equal > 1) {
        found.leader[first] = first;
        found.any = true;
      }
      pending.resize(others);
    }
  }
  return found;
}

}  // namespace dcpp::detail
