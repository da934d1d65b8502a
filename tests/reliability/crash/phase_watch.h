#pragma once
// Follows a CheckpointManager's JSON-lines phase log (CheckpointManagerOptions::metrics_file) as
// the job appends to it: which phases have begun and not ended (what a kill now would hit), and
// how long each phase usually takes.

#include <chrono>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

namespace crash {

/// The phases a kill is reported against. "training": no save, prune or load phase open;
/// "startup": the same, before the job started training (process start, rendezvous, the removal of
/// an earlier job's leftovers; the driver decides this one, the log has no record of it).
enum class Phase { kStaging, kWriting, kCommit, kPruning, kLoading, kStartup, kTraining };
const char* phase_name(Phase phase);
const std::vector<Phase>& all_phases();

/// One record of the log.
struct PhaseEvent {
  bool begin = false;
  std::string operation;  // save, prune, load, export
  std::string phase;      // plan, stage, write, commit, delete, read
  long long step = 0;
  double seconds = 0;  // end records: the phase's duration
};

/// The phase of the report a record belongs to.
Phase phase_of(const PhaseEvent& event);

/// Not thread-safe. Uses inotify on the log's directory, so the driver can poll() it.
class PhaseWatch {
 public:
  /// Watches `file` (which may not exist yet) from its current end: earlier records are ignored.
  explicit PhaseWatch(std::filesystem::path file);
  ~PhaseWatch();
  PhaseWatch(const PhaseWatch&) = delete;
  PhaseWatch& operator=(const PhaseWatch&) = delete;

  /// Readable when the directory changed: call read_new().
  int fd() const { return inotify_; }
  /// Reads the records appended since the last call (complete lines only) and updates open().
  std::vector<PhaseEvent> read_new();
  /// The phases begun and not ended, as (operation, phase, step).
  const std::set<std::tuple<std::string, std::string, long long>>& open() const { return open_; }
  /// The report phases of open(); {kTraining} when none is open.
  std::set<Phase> open_phases() const;

 private:
  std::filesystem::path file_;
  int inotify_ = -1;
  long long offset_ = 0;
  std::string pending_;
  std::set<std::tuple<std::string, std::string, long long>> open_;
};

/// The record whose begin starts a kill timed inside `phase` (staging: "save stage", writing:
/// "save write", commit: "save commit", pruning: "prune delete"), as (operation, phase).
std::pair<std::string, std::string> trigger_of(Phase phase);

/// Durations of each logged phase seen so far (end records), to time kills inside a phase.
class PhaseDurations {
 public:
  void add(const PhaseEvent& event);
  /// The median duration of the logged (operation, phase) in seconds, or `fallback` before any
  /// was seen.
  double median(const std::pair<std::string, std::string>& logged, double fallback) const;

 private:
  std::map<std::pair<std::string, std::string>, std::vector<double>> seconds_;
};

}  // namespace crash
