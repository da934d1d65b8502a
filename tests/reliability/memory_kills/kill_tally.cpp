#include "kill_tally.h"

#include <cstdio>
#include <map>

namespace memory_kills {

void print_trial(const Trial& trial) {
  std::printf("trial %4d (%s, copy_while_training %d):", trial.index, trial.job.c_str(),
              trial.copy_while_training ? 1 : 0);
  for (const Kill& k : trial.kills) {
    std::printf(" [%s %s at %.3f s, step %lld printed -> ",
                k.during_restart ? "restart: kill" : "kill", k.kind.c_str(), k.at_seconds,
                k.printed);
    if (k.resumed) {
      std::printf("%s step %lld, lost %lld]", k.resumed_source.c_str(), *k.resumed, k.lost());
    } else {
      std::printf("restart killed before it resumed]");
    }
  }
  std::printf(" %s\n", trial.ok() ? "ok" : "FAILED");
  for (const auto& note : trial.notes) std::printf("    %s\n", note.c_str());
  for (const auto& failure : trial.failures) {
    std::printf("  FAILED trial %d: %s\n", trial.index, failure.c_str());
  }
  std::fflush(stdout);
}

int print_report(const std::vector<Trial>& trials, unsigned long long seed, double seconds) {
  // Columns: the first kill by kind, the second kills (any kind), copy_while_training off and
  // on, every kill.
  const std::vector<std::string> columns{"one rank",
                                         "all ranks",
                                         "launcher",
                                         "during a restart",
                                         "copy while training off",
                                         "copy while training on",
                                         "all kills"};
  std::map<long long, std::vector<int>> rows;
  std::map<std::string, int> sources;
  int unresumed = 0, kills = 0, failed = 0;
  for (const Trial& t : trials) {
    failed += t.ok() ? 0 : 1;
    for (const Kill& k : t.kills) {
      kills += 1;
      if (!k.resumed) {
        unresumed += 1;
        continue;
      }
      sources[k.resumed_source] += 1;
      auto& row = rows[k.lost()];
      row.resize(columns.size(), 0);
      const size_t kind = k.during_restart        ? 3
                          : k.kind == "launcher"  ? 2
                          : k.kind == "all ranks" ? 1
                                                  : 0;
      row[kind] += 1;
      row[t.copy_while_training ? 5 : 4] += 1;
      row[6] += 1;
    }
  }
  std::printf("\n| steps lost |");
  for (const auto& c : columns) std::printf(" %s |", c.c_str());
  std::printf("\n|---:|");
  for (size_t i = 0; i < columns.size(); ++i) std::printf("---:|");
  std::printf("\n");
  for (const auto& [lost, counts] : rows) {
    std::printf("| %lld |", lost);
    for (int n : counts) std::printf(" %d |", n);
    std::printf("\n");
  }
  std::printf(
      "\n%zu trials (seed %llu) in %.0f s: %d kills, %d of them followed by a resume (from memory "
      "%d, from disk %d, a fresh start %d), %d by a restart that was killed before it resumed; %d "
      "trials failed.\n",
      trials.size(), seed, seconds, kills, kills - unresumed, sources["memory"], sources["disk"],
      sources["fresh"], unresumed, failed);
  std::printf("%s\n", failed == 0 ? "memory_kill_driver: every trial resumed bit for bit, losing "
                                    "at most 1 step"
                                  : "memory_kill_driver: FAILURES (see above)");
  for (const Trial& t : trials) {
    for (const auto& failure : t.failures) {
      std::printf("  FAILED trial %d: %s\n", t.index, failure.c_str());
    }
  }
  return failed;
}

}  // namespace memory_kills
