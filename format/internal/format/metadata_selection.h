#pragma once
// The part of a `.metadata` that one rank's load needs (issue 62): a rank that reads 1/10,000 of a
// checkpoint keeps 1/10,000 of its chunks, not a Metadata of ten million.

#include <dcpp/format/metadata.h>

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace dcpp::detail {

/// Which chunks a decode of a `.metadata` keeps (decode_metadata). Every key of
/// state_dict_metadata stays, with its properties and size (a load reports the keys it did not
/// load); of a tensor, only the chunks that share an element with a box asked for its key, and
/// empty chunks; of storage_data, the entries of the chunks kept and of every value (no offset).
class MetadataSelection {
 public:
  struct Box {
    std::vector<int64_t> offsets;
    std::vector<int64_t> sizes;
  };

  /// Keeps the chunks of `key` that overlap the box at `offsets` of `sizes` (global coordinates).
  void add_box(const std::string& key, std::vector<int64_t> offsets, std::vector<int64_t> sizes);

  /// The boxes asked for `key`; null where none were (its chunks are all left out).
  const std::vector<Box>* boxes_of(std::string_view key) const;
  /// Whether a chunk with `boxes` (boxes_of its key) is kept.
  static bool keeps(const std::vector<Box>* boxes, const ChunkStorageMetadata& chunk);

 private:
  std::map<std::string, std::vector<Box>, std::less<>> boxes_;
};

}  // namespace dcpp::detail
