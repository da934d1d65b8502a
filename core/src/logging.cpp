#include "logging.h"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <cstdlib>
#include <mutex>

namespace dcpp::detail {

spdlog::logger& logger() {
  static std::once_flag once;
  static std::shared_ptr<spdlog::logger> instance;
  std::call_once(once, [] {
    instance = spdlog::get("dcpp");
    if (!instance) {
      instance = spdlog::stderr_color_mt("dcpp");
      const char* level = std::getenv("DCPP_LOG_LEVEL");
      instance->set_level(spdlog::level::from_str(level != nullptr ? level : "warn"));
    }
  });
  return *instance;
}

}  // namespace dcpp::detail
