#pragma once
// What a MemoryStepCache keeps (memory_step.h): the last Metadata and its pickle, the layout of the
// step that Metadata describes, and each value item's last pickle and `torch.save` archive.

#include "storage/memory_step_layout.h"

#include <dcpp/format/metadata.h>
#include <dcpp/storage/memory_step.h>

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>

namespace dcpp {

struct MemoryStepCache::State {
  /// The pickle of `metadata`: the last one's while `metadata` equals the last Metadata.
  const std::string& pickled_metadata(const Metadata& metadata);
  /// The archive of the value item `key` whose pickle (holding no tensor) is `pickle`: the last
  /// one's while the pickle is the same. Stays valid until the next call for `key`.
  const std::string& value_archive(const std::string& key, const std::string& pickle);

  std::optional<Metadata> metadata;
  std::string metadata_pickle;
  /// The layout of the last step planned in full, whose Metadata is `metadata`: set only when
  /// the DefaultSavePlanner planned it (its Metadata follows from the layout alone).
  std::optional<detail::MemoryStepLayout> layout;
  int64_t metadata_reused = 0;
  int64_t metadata_pickled = 0;
  int64_t layouts_repeated = 0;
  std::unordered_map<std::string, std::pair<std::string, std::string>> values;  // pickle, archive
};

}  // namespace dcpp
