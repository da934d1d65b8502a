#pragma once
// dcpp's one named spdlog logger.

#include <spdlog/logger.h>

namespace dcpp::detail {

/// The logger named "dcpp" (never spdlog's default one), created on first use if the application
/// has not registered its own: it writes to stderr at the level of $DCPP_LOG_LEVEL (default
/// "warn"). Thread-safe.
spdlog::logger& logger();

}  // namespace dcpp::detail
