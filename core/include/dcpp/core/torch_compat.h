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

// ---------------------------------------------------------------------------------------------
// c10d (distributed). Templates on the c10d types, so this header needs no c10d (or Gloo)
// include; they are instantiated where the c10d headers are (dist/src/process_group.cpp).
//   - libtorch 1.13: ProcessGroupGloo *is* a c10d::ProcessGroup.
//   - libtorch 2.x: ProcessGroupGloo is a c10d::Backend; a c10d::ProcessGroup fronts it
//     (registered for CPU and CUDA tensors, as Python's "gloo" backend is), and the ProcessGroup
//     constructor took Options up to 2.2 and no Options from 2.3 on.
//   - TCPStoreOptions gained `useLibUV` (2.3, default true from 2.4), which fails where libtorch
//     was built without libuv (Debian's 2.6): dcpp uses the classic store server unless the
//     environment says USE_LIBUV=1.
// ---------------------------------------------------------------------------------------------

#include <chrono>
#include <utility>

namespace dcpp::compat {

namespace detail {
template <typename T, typename = void>
struct HasUseLibUV : std::false_type {};
template <typename T>
struct HasUseLibUV<T, std::void_t<decltype(std::declval<T&>().useLibUV)>> : std::true_type {};
}  // namespace detail

/// Where TCPStoreOptions has `useLibUV`: the libuv store server only when `use_libuv_env` (the
/// value of USE_LIBUV, or null) is "1". Nothing on libtorch 1.13.
template <typename TCPStoreOptions>
void apply_libuv_choice(TCPStoreOptions& options, const char* use_libuv_env) {
  if constexpr (detail::HasUseLibUV<TCPStoreOptions>::value) {
    options.useLibUV = use_libuv_env != nullptr && std::string(use_libuv_env) == "1";
  }
}

namespace detail {
template <typename G, typename = void>
struct HasDeviceBackends : std::false_type {};
template <typename G>
struct HasDeviceBackends<G,
                         std::void_t<decltype(std::declval<G&>().getBackend(c10::DeviceType::CPU))>>
    : std::true_type {};
}  // namespace detail

/// The name of the backend ("gloo", "nccl", ...) that `group` runs tensors of `device` on, or ""
/// where it has none. On 2.x, the group's backend registered for that device type; on 1.13, where
/// a group is one backend, its name for CPU tensors unless it is NCCL, and for CUDA tensors when it
/// is NCCL or Gloo (both take them).
template <typename ProcessGroup>
std::string backend_for(ProcessGroup& group, c10::DeviceType device) {
  try {
    if constexpr (detail::HasDeviceBackends<ProcessGroup>::value) {
      const auto backend = group.getBackend(device);
      return backend ? backend->getBackendName() : std::string();
    } else {
      const std::string name = group.getBackendName();
      if (device == c10::DeviceType::CPU) return name == "nccl" ? std::string() : name;
      if (device == c10::DeviceType::CUDA) {
        return name == "nccl" || name == "gloo" ? name : std::string();
      }
      return std::string();
    }
  } catch (const std::exception&) {
    // 2.x throws where no backend is registered for the device type; a 1.13 group that cannot
    // name its backend is assumed to take CPU tensors.
    const bool cpu_assumed =
        !detail::HasDeviceBackends<ProcessGroup>::value && device == c10::DeviceType::CPU;
    return cpu_assumed ? std::string("unknown") : std::string();
  }
}

/// A Gloo process group as the c10d::ProcessGroup callers use: the object itself on libtorch
/// 1.13, a ProcessGroup with it as the backend for CPU and CUDA tensors on 2.x.
template <typename ProcessGroup, typename Gloo, typename StorePtr>
c10::intrusive_ptr<ProcessGroup> gloo_as_process_group(const StorePtr& store, int rank, int size,
                                                       std::chrono::milliseconds timeout,
                                                       const c10::intrusive_ptr<Gloo>& gloo) {
  if constexpr (std::is_base_of_v<ProcessGroup, Gloo>) {
    return gloo;
  } else {
    c10::intrusive_ptr<ProcessGroup> group;
    if constexpr (std::is_constructible_v<ProcessGroup, StorePtr, int, int>) {
      group = c10::make_intrusive<ProcessGroup>(store, rank, size);
    } else {
      group = c10::make_intrusive<ProcessGroup>(
          store, rank, size, c10::make_intrusive<typename ProcessGroup::Options>("gloo", timeout));
    }
    using BackendPtr = decltype(group->getBackend(c10::DeviceType::CPU));
    const BackendPtr backend(gloo);
    group->setBackend(c10::DeviceType::CPU, ProcessGroup::BackendType::GLOO, backend);
    group->setBackend(c10::DeviceType::CUDA, ProcessGroup::BackendType::GLOO, backend);
    group->setDefaultBackend(ProcessGroup::BackendType::GLOO);
    return group;
  }
}

}  // namespace dcpp::compat
