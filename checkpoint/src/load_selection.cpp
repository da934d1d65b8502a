#include "load_selection.h"

#include "planner/planner_helpers.h"

#include <dcpp/state_dict/flatten.h>

namespace dcpp::detail {

MetadataSelection load_selection(StateDict& state_dict) {
  MetadataSelection selection;
  for (const FlatEntry& entry : flatten_state_dict(state_dict)) {
    const StateValue& value = *entry.value;
    if (!value.is_tensor() && !value.is_sharded_tensor()) continue;
    for (const LocalChunk& chunk : local_chunks(value)) {
      selection.add_box(entry.key, chunk.offsets, chunk.tensor.sizes().vec());
    }
  }
  return selection;
}

}  // namespace dcpp::detail
