#pragma once
// The differences between the libtorch versions dcpp builds on (Debian's 1.13, and 2.x as
// PyTorch wheels ship it), in one place.

#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>

#include <sstream>
#include <string>
#include <type_traits>

/// Defined when libtorch has the float8 dtypes (2.1 and later).
#if __has_include(<c10/util/Float8_e5m2.h>)
#define DCPP_HAS_FLOAT8 1
#endif

namespace dcpp::compat {

/// What c10::Error's base constructor takes for "no backtrace": an empty string on libtorch 1.13,
/// a null lazily computed backtrace on 2.x.
inline auto no_backtrace() {
  if constexpr (std::is_constructible_v<c10::Error, std::string, std::string, const void*>) {
    return std::string();
  } else {
    return nullptr;
  }
}

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
