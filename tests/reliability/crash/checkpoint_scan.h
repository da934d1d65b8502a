#pragma once
// What a killed job left under a checkpoint root, read from the file system alone (not through the
// library under test): complete step checkpoints and leftovers.

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace crash {

struct RootScan {
  /// Steps of the directories named `step-<8+ digits>` that hold `.metadata` and
  /// `dcpp_checkpoint.json` (a committed checkpoint), ascending.
  std::vector<long long> complete;
  /// Names of everything else under the root (`.incomplete`, `.deleting`, stray files).
  std::vector<std::string> other;
  std::optional<long long> latest() const {
    if (complete.empty()) return std::nullopt;
    return complete.back();
  }
};

RootScan scan_root(const std::filesystem::path& root);

}  // namespace crash
