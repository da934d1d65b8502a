#pragma once
// The part of a checkpoint's Metadata that one rank's load needs (issue 62): a rank that reads
// 1/10,000 of a checkpoint keeps 1/10,000 of its chunks, not a Metadata of ten million.

#include <dcpp/core/export.h>
#include <dcpp/format/metadata.h>

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace dcpp {

/// Which chunks of a checkpoint a load reads: boxes (global offsets and sizes) by key. A Metadata
/// read with a selection (StorageReader::narrow_metadata) keeps every key of
/// state_dict_metadata with its properties and size; of a key the selection names, only the
/// chunks that share an element with one of its boxes (and empty chunks); of other keys, every
/// chunk; of storage_data, the entries of the chunks kept and of every value (no offset).
class DCPP_API MetadataSelection {
 public:
  struct Box {
    std::vector<int64_t> offsets;
    std::vector<int64_t> sizes;
  };

  /// Keeps the chunks of `key` that overlap the box at `offsets` of `sizes`, and no other chunk
  /// of `key` unless another box asks for it.
  void add_box(const std::string& key, std::vector<int64_t> offsets, std::vector<int64_t> sizes);

  /// The boxes asked for `key`; null where the selection does not name it (every chunk kept).
  const std::vector<Box>* boxes_of(std::string_view key) const;
  /// Whether a chunk of a key with `boxes` (boxes_of the key) is kept.
  static bool keeps(const std::vector<Box>* boxes, const ChunkStorageMetadata& chunk);
  bool empty() const { return boxes_.empty(); }

 private:
  std::map<std::string, std::vector<Box>, std::less<>> boxes_;
};

}  // namespace dcpp
