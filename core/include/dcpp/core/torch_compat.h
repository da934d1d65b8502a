#pragma once
// The differences between the libtorch versions dcpp builds on (Debian's 1.13, and 2.x as
// PyTorch wheels ship it), in one place.

#include <ATen/core/Tensor.h>

#include <sstream>
#include <string>
#include <type_traits>

namespace dcpp::compat {

/// The key under which a libtorch optimizer keeps the state of `param` in `Optimizer::state()`:
/// libtorch 1.13 uses the TensorImpl address printed as a string, later versions the address.
template <typename StateMap>
typename StateMap::key_type optimizer_state_key(const StateMap& /*state*/,
                                                const at::Tensor& param) {
  using Key = typename StateMap::key_type;
  if constexpr (std::is_same_v<Key, std::string>) {
    std::ostringstream key;
    key << param.unsafeGetTensorImpl();
    return key.str();
  } else {
    return static_cast<Key>(param.unsafeGetTensorImpl());
  }
}

}  // namespace dcpp::compat
