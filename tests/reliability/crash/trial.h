#pragma once
// One trial of the crash driver (a kill and the check of the resume that follows) and the report
// over all trials.

#include "phase_watch.h"

#include <optional>
#include <set>
#include <string>
#include <vector>

namespace crash {

/// What one trial did and found.
struct Trial {
  int index = 0;
  std::string kill;    // "all ranks" or "rank R"
  std::string timing;  // "uniform 0.420 s", "commit #2 +0.80 ms", "startup 1.2 s"
  std::optional<Phase> target;
  std::set<Phase> hit;              // the phases in progress at the kill
  std::string open;                 // the same, as logged: "save write 8; prune delete 4; "
  std::optional<long long> latest;  // the latest complete checkpoint after the kill
  long long committed_before_kill = -1;
  std::string checked_by;  // "verify ddp x3", "next training run"
  bool ok = true;
  std::vector<std::string> failures;
  void fail(const std::string& why) {
    ok = false;
    failures.push_back(why);
  }
};

/// One line: the kill, the phases hit, the latest step, who checks it and the outcome so far.
void print_trial(const Trial& trial);
/// The trial's failures, one line each (nothing when it passed).
void print_failures(const Trial& trial);

/// The per-phase table (markdown) and a summary; returns how many trials failed.
int print_report(const std::vector<Trial>& trials, unsigned long long seed, double seconds,
                 const PhaseDurations& durations);

}  // namespace crash
