#pragma once
// The `.metadata` file: `Metadata` as a pickle Python's `pickle.load` reads into DCP's own classes.

#include <dcpp/format/metadata.h>

#include <string>
#include <string_view>
#include <vector>

namespace dcpp {
class MetadataSelection;
}  // namespace dcpp

namespace dcpp::detail {

/// Pickles `metadata` (protocol 4) as DCP does: each class as STACK_GLOBAL + EMPTY_TUPLE + NEWOBJ +
/// state + BUILD, torch.Size as REDUCE(torch.Size, (tuple,)), dtypes as bare globals.
std::string encode_metadata(const Metadata& metadata);

/// One `storage_data` entry held elsewhere (a write result's index and storage info).
struct StorageEntryRef {
  const MetadataIndex* index;
  const StorageInfo* info;
};

/// As above, with `more_storage_data` after `metadata.storage_data`: a coordinator's million
/// write results pickled where they lie, not copied into the Metadata first.
std::string encode_metadata(const Metadata& metadata,
                            const std::vector<StorageEntryRef>& more_storage_data);

/// Unpickles a `.metadata` written by PyTorch 2.x (any protocol 2 to 5) or by dcpp. Only DCP's
/// globals are accepted (old `torch.distributed._shard` locations included); nothing is called.
/// Throws CheckpointError naming `source` and what is wrong: truncation, a foreign global, a
/// missing or mistyped field, an unknown dtype.
Metadata decode_metadata(std::string_view bytes, const std::string& source);

/// How decode_metadata read a pickle (for tests and benchmarks).
struct MetadataDecodeStats {
  /// True where state_dict_metadata's entries, their chunks and storage_data's entries were
  /// converted as the pickle was read, so that the tree never held them; false where the pickle's
  /// layout is not DCP's and it was read whole first.
  bool streamed = false;
  std::size_t tree_bytes = 0;  // what the tree of the rest held, nodes and items
};
/// With a `selection`, only the chunks it keeps, and their storage_data (MetadataSelection): what
/// one rank's load needs of a large checkpoint.
Metadata decode_metadata(std::string_view bytes, const std::string& source,
                         MetadataDecodeStats& stats, const MetadataSelection* selection = nullptr);

/// As decode_metadata, reading the whole pickle as a tree first: what the streamed decode is
/// checked against.
Metadata decode_metadata_as_tree(std::string_view bytes, const std::string& source,
                                 const MetadataSelection* selection = nullptr);

}  // namespace dcpp::detail
