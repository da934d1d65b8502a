#pragma once
// dcpp's one named spdlog logger.

#include <spdlog/logger.h>

namespace dcpp::detail {

/// The logger named "dcpp" (never spdlog's default one). Found in spdlog's registry, or created
/// there on first use if neither the application nor another dcpp library has registered one: it
/// then writes to stderr at the level of $DCPP_LOG_LEVEL (default "info": what a training job
/// needs to see, such as where it resumed from and each committed checkpoint; "debug" adds the
/// phases of every save and load). Each dcpp library links
/// its own hidden copy of this function (dcpp_core_internals); the registry, in the shared
/// libspdlog, is what makes them all log through one logger object. Thread-safe.
spdlog::logger& logger();

}  // namespace dcpp::detail
