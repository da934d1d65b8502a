#pragma once
// A load trusts the saved chunks of a tensor to tile it: it counts the elements they give each
// local chunk, so two saved chunks that overlap could hide a part that none holds (the load would
// leave it as it was, or return uninitialized memory). Checking that no two overlap makes that
// count exact.

#include <dcpp/format/metadata.h>

#include <string>

namespace dcpp::detail {

/// Throws CheckpointError (kCorrupt) when a saved chunk of `key` (`tensor`, an entry of
/// `metadata.state_dict_metadata`) has not as many dimensions as the tensor, or when two of its
/// chunks share an element, equal chunks included (DCP's save writes each chunk once and refuses
/// overlapping ones, so its `.metadata` never lists one twice). The message names the key, both
/// chunks (offsets, sizes, position and data file) and `.metadata`, and says what to do.
/// O(n log n) in the number of chunks for chunks split along one dimension
/// (first_overlap, state_dict/box.h); `metadata` is read only to name the data files of a pair
/// that overlaps. Pure, does not block.
void check_saved_chunks_disjoint(const std::string& key, const TensorStorageMetadata& tensor,
                                 const Metadata& metadata);

}  // namespace dcpp::detail
