#pragma once
// The trials of the memory-tier kill harness and their report: the steps each kill lost, as a
// distribution over the kinds of kill.

#include <optional>
#include <string>
#include <vector>

namespace memory_kills {

/// One SIGKILL and the resume that followed it.
struct Kill {
  std::string kind;             // "rank 0", "rank 1", "all ranks", "launcher"
  bool during_restart = false;  // the second kill of a trial, in the restart after the first
  double at_seconds = 0;        // after training began (first kill) or after the launch (second)
  /// The newest step whose loss line any run of the trial printed before this kill (none: 0).
  long long printed = 0;
  /// The step the next run resumed from, once it said so (0: a fresh start); nullopt when that run
  /// was killed before it said (the kill after it is then tallied against the same printed step).
  std::optional<long long> resumed;
  std::string resumed_source;  // "memory", "disk" or "fresh"
  /// Steps lost: printed - resumed. Negative only when the killed launcher took a step's line with
  /// it (the ranks' lines reach the driver through it).
  long long lost() const { return printed - resumed.value_or(printed); }
};

struct Trial {
  int index = 0;
  bool copy_while_training = false;
  std::string job;  // the memory tier's job name
  std::vector<Kill> kills;
  std::vector<std::string> notes;  // how orphaned ranks ended, and the like
  std::vector<std::string> failures;
  bool ok() const { return failures.empty(); }
  void fail(const std::string& why) { failures.push_back(why); }
};

/// One line per kill, then the notes and failures.
void print_trial(const Trial& trial);

/// The distribution of steps lost (markdown: a row per count, a column per kind of kill), where
/// the restarts resumed from, and a summary; returns how many trials failed.
int print_report(const std::vector<Trial>& trials, unsigned long long seed, double seconds);

}  // namespace memory_kills
