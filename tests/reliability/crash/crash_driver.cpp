// crash_driver: kills a multi-rank training job with SIGKILL at random moments and checks that it
// resumes from the latest complete checkpoint with exactly the values that were saved.
//
//   crash_driver --launcher dcpp-launch --worker crash_worker --work DIR [--trials T] [--seed S]
//
// Each trial starts the job (crash_worker train: FSDP on 2 ranks, async saves every 4 steps with
// the TBB stager, keep the latest 2), waits until it trains, and SIGKILLs it:
//   - at a uniform random moment of its training (up to --window s after every rank started), or
//   - at a random point inside a phase it sees beginning: the K-th staging, writing, commit or
//     pruning of this run (K in 1..3) or its resume's read, after a uniform random fraction of that
//     phase's median duration so far. The driver follows the manager's phase log (begin and end
//     records).
//   - or during startup (process start, rendezvous, removal of the previous kill's leftovers,
//     resume): a uniform moment up to 1.1 x the median time the job took to start training.
// Every rank at once (a job or node lost), or one rank alone (the launcher then stops the others).
// Which phases were in progress at the kill is what the phase log says at that instant.
//
// Then it checks, from the file system alone, the latest complete checkpoint (a `step-N` directory
// with `.metadata` and the manifest) and that no save whose commit ended before the kill was lost;
// and runs the next job — a verify run (resume only, in a rotating layout: FSDP or DDP on 1, 2 or
// 3 ranks) or, for some trials, the next trial's training run — which must resume from exactly that
// step (never an `.incomplete` one), load it, and find every value equal bit for bit to what each
// rank recorded before saving it; after it, no `.incomplete` or `.deleting` leftovers remain.
//
// Prints the per-phase table and exits 0 only when every trial passed. T: --trials, else
// $DCPP_CRASH_TRIALS, else 8. S: --seed, else $DCPP_CRASH_SEED, else from the clock (printed).

#include "checkpoint_scan.h"
#include "launched_job.h"
#include "phase_watch.h"
#include "resume_check.h"
#include "trial.h"

#include <CLI/CLI.hpp>

#include <poll.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <random>
#include <regex>
#include <string>

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using crash::Phase;
using crash::Trial;

struct Config {
  std::string launcher, worker, work;
  int trials = 8;
  unsigned long long seed = 0;
  int ranks = 2;
  int save_every = 4;
  int width = 512;
  double window = 1.0;            // uniform kills: seconds of training
  double targeted = 0.5;          // share of kills timed inside a phase
  double one_rank = 0.2;          // share of kills of one rank only
  double startup = 0.1;           // share of kills during startup (before training)
  double next_run_checks = 0.25;  // share of trials checked by the next training run
  double startup_timeout = 120, run_timeout = 180;
};

struct Layout {
  std::string name;
  int ranks;
};
const std::vector<Layout> kVerifyLayouts{{"fsdp", 2}, {"ddp", 3}, {"fsdp", 3}, {"ddp", 1}};

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

std::string fixed(double v, int digits) {
  char text[64];
  std::snprintf(text, sizeof(text), "%.*f", digits, v);
  return text;
}

std::vector<std::string> worker_command(const Config& c, const std::string& mode,
                                        const std::string& layout, bool metrics) {
  std::vector<std::string> command{c.worker,         mode,
                                   c.work + "/root", c.work + "/records",
                                   "--layout",       layout,
                                   "--save-every",   std::to_string(c.save_every),
                                   "--width",        std::to_string(c.width)};
  if (metrics) {
    command.push_back("--metrics");
    command.push_back(c.work + "/metrics/metrics.jsonl");
  }
  return command;
}

void check_no_leftovers(const Config& c, const std::string& run, Trial& trial) {
  const crash::RootScan scan = crash::scan_root(c.work + "/root");
  for (const auto& name : scan.other) {
    trial.fail("after " + run + ": '" + name + "' is still under the root");
  }
}

std::string tail_of(const fs::path& log, size_t lines) {
  std::ifstream in(log);
  std::vector<std::string> all;
  for (std::string line; std::getline(in, line);) all.push_back(line);
  std::string text;
  for (size_t i = all.size() > lines ? all.size() - lines : 0; i < all.size(); ++i) {
    text += "    " + all[i] + "\n";
  }
  return text;
}

class Driver {
 public:
  explicit Driver(Config c) : c_(std::move(c)), random_(c_.seed) {}

  int run() {
    fs::remove_all(c_.work);
    for (const char* dir : {"root", "records", "metrics", "logs"}) {
      fs::create_directories(fs::path(c_.work) / dir);
    }
    std::printf("crash_driver: %d trials, seed %llu (rerun: --seed %llu), work %s\n", c_.trials,
                c_.seed, c_.seed, c_.work.c_str());
    std::fflush(stdout);
    const auto start = Clock::now();
    int pending = -1;  // a trial the next training run checks (its index), or -1
    for (int t = 0; t < c_.trials; ++t) {
      trials_.emplace_back();
      Trial& trial = trials_.back();
      trial.index = t;
      run_trial(trial, pending);
      // Check this trial now with a verify run, or leave it to the next training run.
      const bool last = t + 1 == c_.trials;
      if (last || uniform() >= c_.next_run_checks) {
        verify_run(trial);
        pending = -1;
      } else {
        pending = static_cast<int>(trials_.size()) - 1;
        trial.checked_by = "next training run";
      }
      drop_old_records();
      crash::print_trial(trial);
    }
    return crash::print_report(trials_, c_.seed, seconds(Clock::now() - start), durations_) == 0
               ? 0
               : 1;
  }

 private:
  double uniform() { return std::uniform_real_distribution<double>(0.0, 1.0)(random_); }
  int pick(int n) { return std::uniform_int_distribution<int>(0, n - 1)(random_); }

  // Startup kills land within the median time the job took to start training so far, plus 10%.
  double startup_window() const {
    if (startup_seconds_.empty()) return 2.0;
    std::vector<double> v = startup_seconds_;
    std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
    return 1.1 * v[v.size() / 2];
  }

  void run_trial(Trial& trial, int pending) {
    // The kill: when, and whom. A startup kill (before training, maybe before every rank is up)
    // kills every rank there is; it is not used when this run must check the previous trial.
    const bool startup = pending < 0 && uniform() < c_.startup;
    const bool one_rank = !startup && uniform() < c_.one_rank;
    const int victim = one_rank ? pick(c_.ranks) : -1;
    trial.kill = one_rank ? "rank " + std::to_string(victim) : "all ranks";
    double delay = 0;
    int occurrence = 0;
    if (startup) {
      delay = uniform() * startup_window();
      trial.timing = "startup " + fixed(delay, 3) + " s";
    } else if (uniform() < c_.targeted) {
      // The resume's read is a target too when there is a checkpoint to resume from, unless this
      // run must report the previous resume.
      std::vector<Phase> targets{Phase::kStaging, Phase::kWriting, Phase::kCommit, Phase::kPruning};
      if (pending < 0 && crash::scan_root(c_.work + "/root").latest()) {
        targets.push_back(Phase::kLoading);
      }
      trial.target = targets[pick(static_cast<int>(targets.size()))];
      occurrence = *trial.target == Phase::kLoading ? 1 : 1 + pick(3);
    } else {
      delay = uniform() * c_.window;
      trial.timing = "uniform " + fixed(delay, 3) + " s";
    }

    const fs::path log =
        fs::path(c_.work) / "logs" / ("trial-" + std::to_string(trial.index) + ".train.log");
    crash::PhaseWatch watch(fs::path(c_.work) / "metrics" / "metrics.jsonl");
    crash::LaunchedJob job(c_.launcher, c_.ranks, worker_command(c_, "train", "fsdp", true), log);
    crash::ResumeReport resumed;
    std::optional<Clock::time_point> training_since, kill_at;
    int seen = 0, training_ranks = 0;
    const auto started = Clock::now();
    if (startup) {
      kill_at = started +
                std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(delay));
    }
    bool ended_early = false;
    for (;;) {
      for (const auto& line : job.read_output()) {
        resumed.take(line);
        // Training has started once every rank said so (each reports its resume before).
        if (line.find("] TRAINING rank ") != std::string::npos && ++training_ranks == c_.ranks) {
          training_since = Clock::now();
          startup_seconds_.push_back(seconds(*training_since - started));
          if (job.remember_ranks() != c_.ranks) trial.fail("not every rank was found running");
          if (!trial.target && !startup) {
            kill_at = *training_since + std::chrono::duration_cast<Clock::duration>(
                                            std::chrono::duration<double>(delay));
          }
        }
      }
      std::vector<crash::PhaseEvent> events;
      try {
        events = watch.read_new();
      } catch (const std::exception& e) {
        trial.fail(e.what());
      }
      for (const auto& e : events) {
        durations_.add(e);
        if (!e.begin && e.operation == "save" && e.phase == "commit") {
          trial.committed_before_kill = std::max(trial.committed_before_kill, e.step);
        }
        if (trial.target && (training_since || *trial.target == Phase::kLoading) && !kill_at &&
            e.begin && std::make_pair(e.operation, e.phase) == crash::trigger_of(*trial.target) &&
            ++seen == occurrence) {
          const double typical = durations_.median(crash::trigger_of(*trial.target), 0.002);
          delay = uniform() * typical;
          kill_at = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                       std::chrono::duration<double>(delay));
          trial.timing = std::string(crash::phase_name(*trial.target)) + " #" +
                         std::to_string(occurrence) + " +" + fixed(delay * 1e3, 2) + " ms";
        }
      }
      if (job.output_ended() || job.exited()) {
        ended_early = true;
        break;
      }
      const auto now = Clock::now();
      if (kill_at && now >= *kill_at) break;
      if (!training_since && seconds(now - started) > c_.startup_timeout) {
        trial.fail("the job did not start training within " + fixed(c_.startup_timeout, 0) + " s");
        break;
      }
      if (training_since && !kill_at && seconds(now - *training_since) > 10) {
        kill_at = now;  // the targeted phase did not come: kill now
        trial.timing = std::string(crash::phase_name(*trial.target)) + " #" +
                       std::to_string(occurrence) + " not reached in 10 s";
      }
      int timeout_ms = 100;
      if (kill_at) {
        timeout_ms = static_cast<int>(std::max<long long>(
            0, std::chrono::duration_cast<std::chrono::milliseconds>(*kill_at - now).count()));
      }
      pollfd fds[2] = {{job.output_fd(), POLLIN, 0}, {watch.fd(), POLLIN, 0}};
      if (kill_at && timeout_ms < 2) {
        // Sub-millisecond precision for kills inside short phases.
        const auto left = std::max<Clock::duration>(Clock::duration::zero(), *kill_at - now);
        const timespec ts{
            0,
            static_cast<long>(std::chrono::duration_cast<std::chrono::nanoseconds>(left).count())};
        ::ppoll(fds, 2, &ts, nullptr);
      } else {
        ::poll(fds, 2, timeout_ms);
      }
    }

    if (ended_early) {
      trial.fail("the training job ended by itself (exit code " +
                 std::to_string(job.wait(std::chrono::seconds(10))) + ") before the kill:\n" +
                 tail_of(log, 15));
    } else {
      // The phases hit: what the log says once the job is dead (every rank killed: the log ends at
      // the kill), or just before the kill of one rank (the others go on until the launcher stops
      // them).
      auto snapshot = [&] {
        try {
          for (const auto& e : watch.read_new()) {
            durations_.add(e);
            if (!e.begin && e.operation == "save" && e.phase == "commit") {
              trial.committed_before_kill = std::max(trial.committed_before_kill, e.step);
            }
          }
        } catch (const std::exception& e) {
          trial.fail(e.what());
        }
        trial.hit = watch.open_phases();
        if (!training_since && trial.hit == std::set<Phase>{Phase::kTraining}) {
          trial.hit = {Phase::kStartup};
        }
        for (const auto& [operation, phase, step] : watch.open()) {
          trial.open += operation + " " + phase + " " + std::to_string(step) + "; ";
        }
      };
      if (one_rank) {
        snapshot();
        if (!job.kill_one_rank(victim)) trial.fail("rank " + std::to_string(victim) + " not found");
      } else if (job.kill_all_ranks() != c_.ranks && !startup) {
        trial.fail("not every rank was running at the kill");
      }
      if (job.wait(std::chrono::seconds(60)) < 0) {
        trial.fail("the job did not end within 60 s of the kill");
      }
      if (!one_rank) snapshot();
    }

    // The previous trial's resume check, when this run was it.
    if (pending >= 0) {
      Trial& previous = trials_[static_cast<size_t>(pending)];
      crash::check_resume(resumed, c_.ranks, previous.latest,
                          "trial " + std::to_string(trial.index) + "'s training run", previous);
      std::printf("trial %3d: checked by trial %d's training run: %s\n", previous.index,
                  trial.index, previous.ok ? "ok" : "FAILED");
      crash::print_failures(previous);
    }

    const crash::RootScan scan = crash::scan_root(c_.work + "/root");
    trial.latest = scan.latest();
    if (trial.committed_before_kill >= 0 &&
        (!trial.latest || *trial.latest < trial.committed_before_kill)) {
      trial.fail("step " + std::to_string(trial.committed_before_kill) +
                 " was committed before the kill but the latest complete checkpoint is " +
                 (trial.latest ? std::to_string(*trial.latest) : "none"));
    }
  }

  void verify_run(Trial& trial) {
    const Layout layout = kVerifyLayouts[verify_runs_++ % kVerifyLayouts.size()];
    trial.checked_by = "verify " + layout.name + " x" + std::to_string(layout.ranks);
    const fs::path log =
        fs::path(c_.work) / "logs" / ("trial-" + std::to_string(trial.index) + ".verify.log");
    crash::LaunchedJob job(c_.launcher, layout.ranks,
                           worker_command(c_, "verify", layout.name, false), log);
    crash::ResumeReport resumed;
    const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                             std::chrono::duration<double>(c_.run_timeout));
    while (!job.output_ended() && Clock::now() < deadline) {
      pollfd p{job.output_fd(), POLLIN, 0};
      ::poll(&p, 1, 100);
      for (const auto& line : job.read_output()) resumed.take(line);
    }
    const int code = job.wait(std::chrono::seconds(10));
    if (code != 0) {
      trial.fail(trial.checked_by + " exited with " + std::to_string(code) + ":\n" +
                 tail_of(log, 15));
    }
    crash::check_resume(resumed, layout.ranks, trial.latest, trial.checked_by, trial);
    check_no_leftovers(c_, trial.checked_by, trial);
  }

  // Records of steps older than the oldest complete checkpoint are never needed again.
  void drop_old_records() {
    const crash::RootScan scan = crash::scan_root(c_.work + "/root");
    if (scan.complete.empty()) return;
    static const std::regex name(R"(step-(\d+)\.rank-\d+(\.tmp)?)");
    for (const auto& entry : fs::directory_iterator(fs::path(c_.work) / "records")) {
      std::smatch m;
      const std::string file = entry.path().filename().string();
      if (std::regex_match(file, m, name) && std::stoll(m[1].str()) < scan.complete.front()) {
        fs::remove(entry.path());
      }
    }
  }

  Config c_;
  std::mt19937_64 random_;
  std::vector<Trial> trials_;
  crash::PhaseDurations durations_;
  size_t verify_runs_ = 0;
  std::vector<double> startup_seconds_;  // launch to training, per training run
};

}  // namespace

int main(int argc, char** argv) {
  Config c;
  if (const char* t = std::getenv("DCPP_CRASH_TRIALS")) c.trials = std::atoi(t);
  if (const char* s = std::getenv("DCPP_CRASH_SEED")) {
    c.seed = std::strtoull(s, nullptr, 10);
  } else {
    c.seed = static_cast<unsigned long long>(
        std::chrono::system_clock::now().time_since_epoch().count() % 1000000007);
  }
  CLI::App app(
      "crash_driver: SIGKILLs a multi-rank training job at random moments and checks its resume");
  app.add_option("--launcher", c.launcher, "dcpp-launch")->required();
  app.add_option("--worker", c.worker, "crash_worker")->required();
  app.add_option("--work", c.work, "work directory (emptied first)")->required();
  app.add_option("--trials", c.trials, "number of trials (default $DCPP_CRASH_TRIALS or 8)");
  app.add_option("--seed", c.seed, "random seed (default $DCPP_CRASH_SEED or the clock)");
  app.add_option("--ranks", c.ranks, "ranks of the training job");
  app.add_option("--save-every", c.save_every, "steps between saves");
  app.add_option("--width", c.width, "hidden width of the model (size of a save)");
  app.add_option("--window", c.window, "uniform kills: up to this many seconds into training");
  app.add_option("--targeted", c.targeted, "share of kills timed inside a phase");
  app.add_option("--one-rank", c.one_rank, "share of kills of one rank only");
  app.add_option("--startup", c.startup, "share of kills during startup (before training)");
  app.add_option("--next-run-checks", c.next_run_checks,
                 "share of trials checked by the next training run rather than a verify run");
  CLI11_PARSE(app, argc, argv);
  try {
    return Driver(c).run();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "crash_driver: %s\n", e.what());
    return 2;
  }
}
