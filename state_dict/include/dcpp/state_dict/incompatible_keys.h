#pragma once
// Keys found on one side only when a state dict meets what it is loaded from: PyTorch's
// `_IncompatibleKeys`.

#include <dcpp/core/export.h>

#include <string>
#include <vector>

namespace dcpp {

/// What a load found on one side only. Returned by dcpp::load (the state dict against the
/// checkpoint) and by set_model_state_dict / set_state_dict (the model against the state dict).
/// A plain value; reporting a key here is not an error by itself (see each function for when a
/// missing key throws instead).
struct DCPP_API IncompatibleKeys {
  /// Keys the destination asks for that the source lacks: for dcpp::load, keys of the state dict
  /// absent from the checkpoint (an error unless partial loads are allowed); for
  /// set_model_state_dict, keys of the model (this process's placements) the state dict lacks.
  std::vector<std::string> missing_keys;
  /// Keys the source has that the destination does not ask for: for dcpp::load, keys of the
  /// checkpoint not in the state dict (never an error: loading part of a checkpoint is normal); for
  /// set_model_state_dict, keys of the state dict the model (this process's placements) lacks.
  std::vector<std::string> unexpected_keys;
};

}  // namespace dcpp
