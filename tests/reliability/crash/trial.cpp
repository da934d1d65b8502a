#include "trial.h"

#include <cstdio>
#include <map>

namespace crash {

void print_failures(const Trial& trial) {
  for (const auto& f : trial.failures) {
    std::printf("  FAILED trial %d: %s\n", trial.index, f.c_str());
  }
}

void print_trial(const Trial& trial) {
  std::string hit;
  for (Phase p : trial.hit) hit += std::string(hit.empty() ? "" : "+") + phase_name(p);
  const char* outcome = trial.checked_by == "next training run" ? "(pending)"
                        : trial.ok                              ? "ok"
                                                                : "FAILED";
  std::printf("trial %3d: kill %-9s %-28s hit %-16s latest %-6s checked by %-19s %s\n", trial.index,
              trial.kill.c_str(), trial.timing.c_str(), hit.c_str(),
              trial.latest ? std::to_string(*trial.latest).c_str() : "none",
              trial.checked_by.c_str(), outcome);
  print_failures(trial);
  std::fflush(stdout);
}

int print_report(const std::vector<Trial>& trials, unsigned long long seed, double seconds,
                 const PhaseDurations& durations) {
  struct Row {
    int trials = 0, ok = 0, failed = 0;
  };
  std::map<Phase, Row> by_phase;
  Row total;
  int overlapping = 0, targeted = 0, target_hit = 0, one_rank = 0, startup = 0;
  std::map<std::string, int> checked_by;
  for (const Trial& t : trials) {
    for (Phase p : t.hit) {
      Row& r = by_phase[p];
      r.trials += 1;
      (t.ok ? r.ok : r.failed) += 1;
    }
    total.trials += 1;
    (t.ok ? total.ok : total.failed) += 1;
    overlapping += t.hit.size() > 1 ? 1 : 0;
    if (t.target) {
      targeted += 1;
      target_hit += t.hit.count(*t.target) ? 1 : 0;
    }
    startup += t.timing.rfind("startup", 0) == 0 ? 1 : 0;
    one_rank += t.kill != "all ranks" ? 1 : 0;
    checked_by[t.checked_by] += 1;
  }
  std::printf("\n| phase in progress at the kill | trials | resumed OK | failures |\n");
  std::printf("|---|---:|---:|---:|\n");
  for (Phase p : all_phases()) {
    const Row& r = by_phase[p];
    std::printf("| %s | %d | %d | %d |\n", phase_name(p), r.trials, r.ok, r.failed);
  }
  std::printf("| **all trials** | %d | %d | %d |\n", total.trials, total.ok, total.failed);
  std::printf(
      "\n%d trials (seed %llu) in %.0f s; %d hit two phases at once (counted in both rows); %d "
      "kills timed inside a phase (%d landed in it), %d at a uniform moment of training, %d "
      "during startup; %d killed one rank only, %d every rank.\nmedian logged durations: save "
      "stage %.2f ms, write %.2f ms, commit %.2f ms, prune delete %.2f ms\nchecked by:",
      total.trials, seed, seconds, overlapping, targeted, target_hit,
      total.trials - targeted - startup, startup, one_rank, total.trials - one_rank,
      durations.median(trigger_of(Phase::kStaging), 0) * 1e3,
      durations.median(trigger_of(Phase::kWriting), 0) * 1e3,
      durations.median(trigger_of(Phase::kCommit), 0) * 1e3,
      durations.median(trigger_of(Phase::kPruning), 0) * 1e3);
  for (const auto& [how, n] : checked_by) std::printf(" %s: %d;", how.c_str(), n);
  std::printf("\n%s\n", total.failed == 0 ? "crash_driver: every trial resumed correctly"
                                          : "crash_driver: FAILURES (see above)");
  return total.failed;
}

}  // namespace crash
