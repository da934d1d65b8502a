#include "phase_log.h"

#include "logging.h"

#include <nlohmann/json.hpp>

#include <chrono>
#include <fstream>

namespace dcpp::detail {

PhaseLog::PhaseLog(std::filesystem::path metrics_file, int rank)
    : metrics_file_(std::move(metrics_file)), rank_(rank) {}

void PhaseLog::record(const std::string& operation, const std::string& phase, int64_t step,
                      int64_t bytes, double seconds, const std::string& path) {
  const double gbps = seconds > 0 ? static_cast<double>(bytes) / seconds / 1e9 : 0.0;
  try {
    logger().info("{} step {} {}: {} bytes in {:.3f} s ({:.3f} GB/s) rank {} {}", operation, step,
                  phase, bytes, seconds, gbps, rank_, path);
    if (metrics_file_.empty()) return;
    nlohmann::json line;
    line["time"] =
        std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    line["operation"] = operation;
    line["phase"] = phase;
    line["step"] = step;
    line["bytes"] = bytes;
    line["seconds"] = seconds;
    line["gb_per_s"] = gbps;
    line["rank"] = rank_;
    line["path"] = path;
    std::lock_guard<std::mutex> lock(mutex_);
    std::ofstream out(metrics_file_, std::ios::app);
    out << line.dump() << '\n';
  } catch (const std::exception& e) {
    logger().warn("dcpp plugin: could not record the {} {} metrics: {}", operation, phase,
                  e.what());
  }
}

}  // namespace dcpp::detail
