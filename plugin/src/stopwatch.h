#pragma once
// How long a phase took, on the steady clock: the seconds of SaveRecord and of the phase log.

#include <chrono>

namespace dcpp::detail {

using SteadyClock = std::chrono::steady_clock;

/// Seconds from `start` to now. Thread-safe; never throws.
inline double seconds_since(SteadyClock::time_point start) {
  return std::chrono::duration<double>(SteadyClock::now() - start).count();
}

}  // namespace dcpp::detail
