#include "phase_log.h"

#include "core/logging.h"

#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

namespace dcpp::detail {

double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

PhaseLog::PhaseLog(std::filesystem::path metrics_file, int rank)
    : metrics_file_(std::move(metrics_file)), rank_(rank) {}

void PhaseLog::begin(const std::string& operation, const std::string& phase, int64_t step,
                     const std::string& path) {
  try {
    logger().debug("{} step {} {}: begin, rank {} {}", operation, step, phase, rank_, path);
    if (metrics_file_.empty()) return;
    append(event("begin", operation, phase, step, path), operation + " " + phase);
  } catch (const std::exception& e) {
    logger().warn("could not record the start of {} {}: {}", operation, phase, e.what());
  }
}

void PhaseLog::record(const std::string& operation, const std::string& phase, int64_t step,
                      int64_t bytes, double seconds, const std::string& path) {
  const double gbps = seconds > 0 ? static_cast<double>(bytes) / seconds / 1e9 : 0.0;
  try {
    if (bytes > 0) {
      logger().debug("{} step {} {}: {} bytes in {:.3f} s ({:.3f} GB/s) rank {} {}", operation,
                     step, phase, bytes, seconds, gbps, rank_, path);
    } else {
      logger().debug("{} step {} {}: {:.3f} s rank {} {}", operation, step, phase, seconds, rank_,
                     path);
    }
    if (metrics_file_.empty()) return;
    nlohmann::json line = event("end", operation, phase, step, path);
    line["bytes"] = bytes;
    line["seconds"] = seconds;
    line["gb_per_s"] = gbps;
    append(line, operation + " " + phase);
  } catch (const std::exception& e) {
    logger().warn("could not record the {} {} metrics: {}", operation, phase, e.what());
  }
}

nlohmann::json PhaseLog::event(const char* name, const std::string& operation,
                               const std::string& phase, int64_t step,
                               const std::string& path) const {
  nlohmann::json line;
  line["event"] = name;
  line["time"] = unix_now();
  line["operation"] = operation;
  line["phase"] = phase;
  line["step"] = step;
  line["rank"] = rank_;
  line["path"] = path;
  return line;
}

void PhaseLog::append(const nlohmann::json& line, const std::string& what) {
  const std::string bytes = line.dump() + '\n';
  const int fd = ::open(metrics_file_.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    logger().warn("could not open the metrics file '{}' for the {} record: {}",
                  metrics_file_.string(), what, std::strerror(errno));
    return;
  }
  ssize_t written;
  do {
    written = ::write(fd, bytes.data(), bytes.size());
  } while (written < 0 && errno == EINTR);
  if (written != static_cast<ssize_t>(bytes.size())) {
    logger().warn("could not append the {} record to the metrics file '{}': {}", what,
                  metrics_file_.string(), written < 0 ? std::strerror(errno) : "short write");
  }
  ::close(fd);
}

}  // namespace dcpp::detail
