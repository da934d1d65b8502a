#pragma once
// Loading an optimizer state dict whatever layout saved it: a nested target (the default of
// get_optimizer_state_dict) loads from a flat checkpoint (a pipeline's, torchtitan's) and a flat
// target from a nested checkpoint, instead of failing on the keys one layout has and the other
// lacks.

#include <dcpp/format/metadata.h>
#include <dcpp/state_dict/state_dict.h>

namespace dcpp::detail {

/// Gives every optimizer state dict in `targets` (a dict value at any depth through dicts, or
/// `targets` itself; optimizer_layout_of) the layout `metadata` holds it in, where the two differ:
/// a nested target under a flat checkpoint becomes flatten_optimizer_state_dict(target); a flat
/// target under a nested checkpoint becomes a nested one whose state values are the target's (the
/// same tensors) and whose param groups are the checkpoint's, each option a placeholder of the
/// saved kind (a tensor of the saved shape and dtype, or None) for the load to fill. Either way
/// set_optimizer_state_dict reads the loaded dict. Local; unchanged where the layouts agree or
/// the checkpoint holds no param groups under that key.
void match_optimizer_layouts(StateDict& targets, const Metadata& metadata);

}  // namespace dcpp::detail
