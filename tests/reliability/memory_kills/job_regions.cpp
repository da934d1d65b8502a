#include "job_regions.h"

#include <algorithm>
#include <filesystem>

namespace memory_kills {

namespace fs = std::filesystem;

std::vector<std::string> job_regions(const std::string& job) {
  const std::string region = "dcpp." + job + ".", lock = "dcpp-job." + job + ".";
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/dev/shm", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(region, 0) == 0 || name.rfind(lock, 0) == 0) names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  return names;
}

int remove_job_regions(const std::string& job) {
  const std::vector<std::string> names = job_regions(job);
  std::error_code ec;
  for (const auto& name : names) fs::remove(fs::path("/dev/shm") / name, ec);
  return static_cast<int>(names.size());
}

}  // namespace memory_kills
