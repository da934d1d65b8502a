#pragma once
// One line per phase of a save or load (plan, stage, write, commit; load: plan, read; prune:
// delete; drain: upload, delete) through the "dcpp" logger at debug level, and optionally one JSON
// object per line in a metrics file: an "end" record (bytes, seconds, GB/s) when a phase finishes
// and a "begin" record when it starts, so that whoever watches the file knows which phase a job is
// in (a job killed mid-phase leaves a begin without its end).

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <filesystem>
#include <string>

namespace dcpp::detail {

/// Now, in seconds since the Unix epoch: the time of metrics lines and of a commit.
double unix_now();

/// Thread-safe (the training thread and the manager's background thread both record): each JSON
/// line is appended with one write(2) on an O_APPEND descriptor, so lines never interleave and a
/// process killed at any moment leaves whole lines only.
class PhaseLog {
 public:
  /// `metrics_file` empty: the logger only. `rank`: included in every line.
  PhaseLog(std::filesystem::path metrics_file, int rank);

  /// A phase starts: logs at debug level; appends {"event":"begin", "operation", "phase",
  /// "step", "rank", "path", "time"} to the metrics file when set. Never throws.
  void begin(const std::string& operation, const std::string& phase, int64_t step,
             const std::string& path);

  /// A phase ended. `operation`: "save", "load", "export", "prune", "drain"; `phase`: "plan",
  /// "stage", "write", "commit", "read", "delete", "upload". `bytes`: what the phase moved on this
  /// rank (0 for a phase that moves no data, such as a commit: logged without a rate). Logs at
  /// debug level; appends {"event":"end", ..., "bytes", "seconds", "gb_per_s"} to the metrics file
  /// when set. Never throws.
  void record(const std::string& operation, const std::string& phase, int64_t step, int64_t bytes,
              double seconds, const std::string& path);

 private:
  // The fields every record has: event, time, operation, phase, step, rank, path.
  nlohmann::json event(const char* name, const std::string& operation, const std::string& phase,
                       int64_t step, const std::string& path) const;
  // Appends `line` and a newline in one write(2); logs a warning when that fails.
  void append(const nlohmann::json& line, const std::string& what);

  std::filesystem::path metrics_file_;
  int rank_;
};

}  // namespace dcpp::detail
