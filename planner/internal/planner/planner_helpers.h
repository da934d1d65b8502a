#pragma once
// The geometry shared by the planners: chunks of a state dict's tensors and their overlaps.

#include <dcpp/planner/plan.h>

#include <dcpp/state_dict/flatten.h>
#include <dcpp/state_dict/state_dict.h>
#include "core/shape_string.h"

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

namespace dcpp::detail {

/// A tensor this process holds for a flat key, with its box in the global tensor.
struct LocalChunk {
  at::Tensor tensor;
  std::vector<int64_t> offsets;
};

/// The local chunks of a tensor or sharded tensor value (a plain tensor is one chunk at the
/// origin).
std::vector<LocalChunk> local_chunks(const StateValue& value);
/// The global shape of a tensor or sharded tensor value.
std::vector<int64_t> global_shape(const StateValue& value);
at::ScalarType value_dtype(const StateValue& value);

/// The read items that fill local chunk `dest` (index `dest_index` among the key's local chunks)
/// from the saved `chunks`: one per non-empty overlap; for an empty local chunk, one for the saved
/// chunk of the same box, if any (nothing to copy, but its item gets read and checked).
/// Sets `covered_elements` to the number of destination elements they cover.
std::vector<ReadItem> read_items_for_chunk(const std::string& fqn, const LocalChunk& dest,
                                           int64_t dest_index,
                                           const std::vector<ChunkStorageMetadata>& chunks,
                                           int64_t* covered_elements);

/// `tensor` narrowed to the box [offsets, offsets + lengths).
at::Tensor narrow_to_box(at::Tensor tensor, const std::vector<int64_t>& offsets,
                         const std::vector<int64_t>& lengths);

/// One write item of the DefaultSavePlanner's local plan and what it writes: a tensor item's
/// chunk, or (a bytes item) an undefined tensor.
struct LocalWriteItem {
  WriteItem item;
  at::Tensor chunk;
};

/// The DefaultSavePlanner's write items of one flat entry, in plan order: one for a plain tensor,
/// one per local shard of a sharded tensor (an empty shard left out unless the tensor is empty:
/// a rank left without rows would otherwise look like another rank's replica), one bytes item for
/// any other value. What create_local_plan plans, and what a memory step written without
/// planning checks itself against (storage/memory_step_layout.h).
std::vector<LocalWriteItem> local_write_items(const FlatEntry& entry);

/// Whether two write items are the same item: index (key and offsets), type, and for a tensor
/// item its chunk, properties and global shape.
bool same_write_item(const WriteItem& a, const WriteItem& b);

/// A StateValue leaf that is not a tensor, as the IValue to save: values as they are, terminal
/// lists as generic lists.
c10::IValue to_saved_value(const StateValue& value);

}  // namespace dcpp::detail
