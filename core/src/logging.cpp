#include "core/logging.h"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <cstdlib>
#include <memory>
#include <mutex>

namespace dcpp::detail {

namespace {

constexpr const char* kLoggerName = "dcpp";

/// The registered "dcpp" logger, registering a new one when there is none. Two dcpp libraries
/// may race to register it: the loser takes the winner's.
std::shared_ptr<spdlog::logger> find_or_create_logger() {
  if (std::shared_ptr<spdlog::logger> existing = spdlog::get(kLoggerName)) {
    return existing;
  }
  try {
    std::shared_ptr<spdlog::logger> created = spdlog::stderr_color_mt(kLoggerName);
    const char* level = std::getenv("DCPP_LOG_LEVEL");
    created->set_level(spdlog::level::from_str(level != nullptr ? level : "info"));
    return created;
  } catch (const spdlog::spdlog_ex&) {
    if (std::shared_ptr<spdlog::logger> existing = spdlog::get(kLoggerName)) {
      return existing;  // registered by someone else between get() and stderr_color_mt()
    }
    throw;
  }
}

}  // namespace

spdlog::logger& logger() {
  static std::once_flag once;
  static std::shared_ptr<spdlog::logger> instance;
  std::call_once(once, [] { instance = find_or_create_logger(); });
  return *instance;
}

}  // namespace dcpp::detail
