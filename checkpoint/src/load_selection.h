#pragma once
// What one rank's load reads of a checkpoint's chunks (issue 62): the boxes of its own tensors, so
// that its reader may leave the other ranks' chunks out of the Metadata it decodes.

#include <dcpp/format/metadata_selection.h>
#include <dcpp/state_dict/state_dict.h>

namespace dcpp::detail {

/// Each tensor's box and each sharded tensor's local shards' boxes in `state_dict`, by flat key
/// (as the default load planner flattens it). Values are not named: their entries are kept whole.
MetadataSelection load_selection(StateDict& state_dict);

}  // namespace dcpp::detail
