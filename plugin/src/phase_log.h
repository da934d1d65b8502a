#pragma once
// One line per phase of a save or load (plan, stage, write, commit; load: plan, read): bytes,
// seconds and GB/s through the "dcpp" logger, and optionally one JSON object per line in a file.

#include <cstdint>
#include <filesystem>
#include <mutex>
#include <string>

namespace dcpp::detail {

/// Thread-safe (the training thread and the manager's background thread both record).
class PhaseLog {
 public:
  /// `metrics_file` empty: the logger only. `rank`: included in every line.
  PhaseLog(std::filesystem::path metrics_file, int rank);

  /// `operation`: "save", "load", "export", "prune"; `phase`: "plan", "stage", "write", "commit",
  /// "read". Logs at info level; appends to the metrics file when set. Never throws.
  void record(const std::string& operation, const std::string& phase, int64_t step, int64_t bytes,
              double seconds, const std::string& path);

 private:
  std::mutex mutex_;
  std::filesystem::path metrics_file_;
  int rank_;
};

}  // namespace dcpp::detail
