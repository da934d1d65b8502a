#pragma once
// What a resumed job said about its resume (crash_worker's RESUME and MISMATCH lines), checked
// against the latest complete checkpoint the driver found on disk.

#include "trial.h"

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace crash {

/// The RESUME / MISMATCH lines of one run, by rank.
struct ResumeReport {
  std::map<int, std::string> lines;  // rank -> "none" or "step N verified E entries B bytes"
  std::vector<std::string> mismatches;
  /// Takes one line of the launcher's output ("[rank R] ..."); other lines are ignored.
  void take(const std::string& line);
};

/// Fails `trial` (naming `run`) unless every rank of a `ranks`-rank run resumed from `latest` (or
/// from nothing when there is none) and found every value equal to what was saved.
void check_resume(const ResumeReport& report, int ranks, std::optional<long long> latest,
                  const std::string& run, Trial& trial);

}  // namespace crash
