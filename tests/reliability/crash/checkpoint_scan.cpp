#include "checkpoint_scan.h"

#include <algorithm>
#include <regex>

namespace crash {
namespace fs = std::filesystem;

RootScan scan_root(const fs::path& root) {
  static const std::regex step_name("step-([0-9]{8,})");
  RootScan scan;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(root, ec)) {
    const std::string name = entry.path().filename().string();
    std::smatch match;
    if (std::regex_match(name, match, step_name) && fs::is_directory(entry.path()) &&
        fs::exists(entry.path() / ".metadata") &&
        fs::exists(entry.path() / "dcpp_checkpoint.json")) {
      scan.complete.push_back(std::stoll(match[1].str()));
    } else {
      scan.other.push_back(name);
    }
  }
  std::sort(scan.complete.begin(), scan.complete.end());
  std::sort(scan.other.begin(), scan.other.end());
  return scan;
}

}  // namespace crash
