// memory_kill_driver: SIGKILLs a 2-rank job that keeps every step in the memory tier
// (examples/memory_tier_resume under dcpp-launch) at random moments, resumes it, and checks that
// the resumed training is the uninterrupted run's bit for bit and that at most one step was lost.
//
//   memory_kill_driver --launcher dcpp-launch --example memory_tier_resume --work DIR
//                      [--trials T] [--seed S] [--first-trial K] [--steps N] [--pause-ms P]
//                      [--second-kill SHARE] [--only rank|all|launcher] [--keep]
//
// First two uninterrupted reference runs (copy_while_training off and on): each step's loss, the
// final parameters' hash, how long startup and training take. Then each trial, on a fresh root
// and a fresh memory-tier job name (SLURM_JOB_ID), copy_while_training off in even trials and on
// in odd ones:
//   1. starts the job and SIGKILLs, at a uniform moment of its training window (the reference's
//      training time), one rank (the launcher then stops the other), every rank, or the launcher
//      itself, a third each unless --only. A killed launcher's ranks must die with it, by the
//      signal its death sends them (SIGKILL or SIGTERM): the driver, a child subreaper, watches
//      them and fails the trial for a rank that ends otherwise (it ran on: it finished, failed, or
//      died writing to the dead launcher's pipe) or is still alive after --orphan-deadline (then
//      killed);
//   2. in a share of trials (--second-kill), starts it again and SIGKILLs that restart too, at a
//      uniform moment up to 1.5 times the reference's startup (so also during its resume and in
//      its first steps);
//   3. starts it again and lets it finish.
// Steps lost by a kill = the newest step whose loss line the trial's runs printed before it (rank
// 0 prints step N after the step's all-reduce, when every rank has finished its update; the
// killed run's output is read to its end) minus the step the next run resumes from. Checks: every
// loss any run prints equals the reference's for that step (as text: a hexadecimal float, bit for
// bit); at most 1 step lost per kill; the last run finishes every step with the reference's
// parameters' hash and leaves none of the job's /dev/shm files (regions, locks) behind; no run
// hangs (--run-timeout). Prints a line per trial, the distribution of steps lost by kind of kill,
// the seed, and exits 1 on any failure. T: --trials, else $DCPP_MEMORY_KILL_TRIALS, else 10. S:
// --seed, else $DCPP_MEMORY_KILL_SEED, else from the clock. A trial's random draws depend on S and
// its index alone: `--seed S --first-trial K --trials 1` replays trial K's kills (not their timing
// to the microsecond).

#include "../crash/launched_job.h"
#include "job_output.h"
#include "job_regions.h"
#include "kill_tally.h"
#include "orphaned_ranks.h"

#include <CLI/CLI.hpp>

#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>
#include <string>

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using memory_kills::JobOutput;
using memory_kills::Kill;
using memory_kills::Trial;

constexpr int kRanks = 2;

struct Config {
  std::string launcher, example, work;
  int trials = 10;
  int first_trial = 0;
  unsigned long long seed = 0;
  int steps = 40;
  int pause_ms = 10;           // each step's stand-in compute (STEP_PAUSE_MS of the example)
  double second_kill = 0.25;   // share of trials whose restart is killed too
  double run_timeout = 120;    // seconds a run may take (start to end) before it counts as hung
  double orphan_deadline = 5;  // seconds a rank may outlive its killed launcher
  bool keep = false;           // keep every trial's root and logs
  std::string only;            // "rank", "all" or "launcher": every kill of that kind
};

enum class KillKind { kOneRank, kAllRanks, kLauncher };

struct KillPlan {
  KillKind kind;
  int rank = 0;              // kOneRank
  double delay = 0;          // seconds
  bool from_launch = false;  // else from the moment training began
};

/// One launch of the job, killed or not.
struct Run {
  JobOutput output;
  int exit_code = -1;
  bool hung = false;
  bool ended_before_kill = false;
  std::string killed;  // the kind of kill done ("" when none)
  Clock::time_point launched;
  std::vector<memory_kills::RankEnd> orphans;  // the ranks of a killed launcher
};

/// An uninterrupted run's outcome, what the trials compare with.
struct Reference {
  std::map<long long, std::string> losses;
  std::string parameters_hash;
  double startup_seconds = 0;   // launch to training
  double training_seconds = 0;  // training to the loss line of the step before the last
};

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }
Clock::duration duration_of(double s) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

std::string tail_of(const fs::path& log, size_t lines) {
  std::ifstream in(log);
  std::vector<std::string> all;
  for (std::string line; std::getline(in, line);) all.push_back(line);
  std::string text;
  for (size_t i = all.size() > lines ? all.size() - lines : 0; i < all.size(); ++i) {
    text += "      " + all[i] + "\n";
  }
  return text;
}

class Driver {
 public:
  explicit Driver(Config c) : c_(std::move(c)) {}

  int run() {
    memory_kills::become_subreaper();
    fs::remove_all(c_.work);
    fs::create_directories(fs::path(c_.work) / "logs");
    std::printf(
        "memory_kill_driver: trials %d..%d, seed %llu (rerun: --seed %llu), %d steps, %d ms "
        "a step's pause, work %s\n",
        c_.first_trial, c_.first_trial + c_.trials - 1, c_.seed, c_.seed, c_.steps, c_.pause_ms,
        c_.work.c_str());
    std::fflush(stdout);
    const auto start = Clock::now();
    std::vector<std::string> setup_failures;
    for (bool copying : {false, true}) {
      references_[copying] = reference_run(copying, setup_failures);
    }
    if (setup_failures.empty() &&
        (references_[0].losses != references_[1].losses ||
         references_[0].parameters_hash != references_[1].parameters_hash)) {
      setup_failures.push_back(
          "the uninterrupted runs with and without copy_while_training differ");
    }
    for (const auto& f : setup_failures) std::printf("  FAILED reference: %s\n", f.c_str());
    if (!setup_failures.empty()) return 1;
    std::printf(
        "reference: startup %.2f s, training %.2f s (%d steps; with copy_while_training %.2f s "
        "and %.2f s), parameters %s\n",
        references_[0].startup_seconds, references_[0].training_seconds, c_.steps,
        references_[1].startup_seconds, references_[1].training_seconds,
        references_[0].parameters_hash.c_str());
    std::vector<Trial> trials;
    for (int t = c_.first_trial; t < c_.first_trial + c_.trials; ++t) {
      trials.push_back(run_trial(t));
      memory_kills::print_trial(trials.back());
    }
    return memory_kills::print_report(trials, c_.seed, seconds(Clock::now() - start)) == 0 ? 0 : 1;
  }

 private:
  std::vector<std::string> command(const fs::path& root, bool copying) const {
    return {c_.example, root.string(), std::to_string(c_.steps), "-1",
            "1",        "0",           copying ? "1" : "0",      std::to_string(c_.pause_ms)};
  }

  Reference reference_run(bool copying, std::vector<std::string>& failures) {
    const std::string id = "mkref" + std::to_string(::getpid()) + "-" + (copying ? "1" : "0");
    ::setenv("SLURM_JOB_ID", id.c_str(), 1);
    const fs::path root = fs::path(c_.work) / ("reference-" + std::to_string(copying));
    const fs::path log = fs::path(c_.work) / "logs" / root.filename().concat(".log");
    const Run run = launch(root, copying, log, std::nullopt);
    Reference ref;
    ref.losses = run.output.losses();
    ref.parameters_hash = run.output.parameters_hash().value_or("");
    const std::string what = std::string("copy_while_training ") + (copying ? "on" : "off");
    if (run.exit_code != 0 || run.output.finished_at() != c_.steps ||
        static_cast<int>(ref.losses.size()) != c_.steps || ref.parameters_hash.empty()) {
      failures.push_back(what + ": the uninterrupted run failed (exit code " +
                         std::to_string(run.exit_code) + "):\n" + tail_of(log, 15));
      return ref;
    }
    const auto training = *run.output.training_since(kRanks);
    ref.startup_seconds = seconds(training - run.launched);
    ref.training_seconds = seconds(*run.output.step_at(c_.steps - 1) - training);
    if (!memory_kills::job_regions("slurm-" + id).empty()) {
      failures.push_back(what + ": the uninterrupted run left /dev/shm files behind");
    }
    memory_kills::remove_job_regions("slurm-" + id);
    return ref;
  }

  // Starts the job, kills it as planned (or not), and reads its output to the end.
  Run launch(const fs::path& root, bool copying, const fs::path& log,
             const std::optional<KillPlan>& plan) {
    Run run;
    run.launched = Clock::now();
    crash::LaunchedJob job(c_.launcher, kRanks, command(root, copying), log);
    const auto deadline = run.launched + duration_of(c_.run_timeout);
    auto take = [&](const std::vector<std::string>& lines) {
      const auto now = Clock::now();
      for (const auto& line : lines) run.output.take(line, now);
    };
    std::optional<Clock::time_point> kill_at;
    if (plan && plan->from_launch) kill_at = run.launched + duration_of(plan->delay);
    while (!job.output_ended()) {
      const auto now = Clock::now();
      if (plan && !kill_at && run.output.training_since(kRanks)) {
        kill_at = *run.output.training_since(kRanks) + duration_of(plan->delay);
      }
      if (kill_at && now >= *kill_at) break;
      if (now >= deadline) break;
      const auto until = kill_at ? std::min(*kill_at, deadline) : deadline;
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - now).count();
      pollfd p{job.output_fd(), POLLIN, 0};
      ::poll(&p, 1, static_cast<int>(std::clamp<long long>(left, 0, 100)));
      take(job.read_output());
    }
    if (plan && job.output_ended()) run.ended_before_kill = true;
    if (plan && !job.output_ended() && kill_at && Clock::now() >= *kill_at) {
      run.killed = kill(job, *plan, run);
    }
    // To the end of its output (every line the ranks printed before they died), then its exit.
    const auto drain_deadline = std::max(deadline, Clock::now() + std::chrono::seconds(60));
    while (!job.output_ended() && Clock::now() < drain_deadline) {
      pollfd p{job.output_fd(), POLLIN, 0};
      ::poll(&p, 1, 100);
      take(job.read_output());
    }
    run.hung = !job.output_ended();
    run.exit_code = job.wait(std::chrono::seconds(run.hung ? 0 : 30));
    if (run.exit_code < 0) run.hung = true;
    return run;
  }

  // The kill itself; returns what was killed. A rank not (yet) running makes it a kill of every
  // rank there is, and no rank at all a kill of the launcher.
  std::string kill(crash::LaunchedJob& job, const KillPlan& plan, Run& run) {
    const auto ranks = job.rank_pids();
    if (plan.kind == KillKind::kOneRank && job.kill_one_rank(plan.rank)) {
      return "rank " + std::to_string(plan.rank);
    }
    if (plan.kind != KillKind::kLauncher && job.kill_all_ranks() > 0) return "all ranks";
    memory_kills::OrphanWatch watch(ranks);
    ::kill(job.pid(), SIGKILL);
    run.orphans =
        watch.wait(std::chrono::milliseconds(static_cast<long long>(c_.orphan_deadline * 1e3)));
    return "launcher";
  }

  // Checks a run's printed losses against the reference; `from`: the first step it must print
  // (with `to`, every step up to it), 0 for a killed run (whatever it printed).
  void check_losses(const Run& run, const Reference& ref, const std::string& what, Trial& trial,
                    long long from = 0, long long to = 0) {
    for (const auto& [step, loss] : run.output.losses()) {
      auto it = ref.losses.find(step);
      if (it == ref.losses.end() || it->second != loss) {
        trial.fail(what + ": step " + std::to_string(step) + " loss " + loss + ", uninterrupted " +
                   (it == ref.losses.end() ? "none" : it->second));
        return;
      }
    }
    for (long long step = from; from > 0 && step <= to; ++step) {
      if (!run.output.losses().count(step)) {
        trial.fail(what + ": no loss printed for step " + std::to_string(step));
        return;
      }
    }
  }

  // The failures a run's end shows: a hang, ranks that outlived their launcher.
  void check_end(const Run& run, const std::string& what, const fs::path& log, Trial& trial) {
    if (run.hung) {
      trial.fail(what + " hung (no end within " + std::to_string(c_.run_timeout) + " s):\n" +
                 tail_of(log, 10));
    }
    for (const auto& end : run.orphans) {
      const std::string line = what + ": rank " + std::to_string(end.rank) + " (pid " +
                               std::to_string(end.pid) +
                               ") after the launcher's SIGKILL: " + end.how;
      if (end.outlived_launcher) {
        trial.fail(line + ": it outlived its launcher");
      } else {
        trial.notes.push_back(line);
      }
    }
  }

  // The step the run resumed from, once every rank said (else the kill stays unresolved).
  void observe_resume(const Run& run, const std::string& what, Kill& kill, Trial& trial) {
    const auto& from = run.output.trains_from();
    if (static_cast<int>(from.size()) < kRanks) return;
    if (from.begin()->second != from.rbegin()->second) {
      trial.fail(what + ": the ranks resumed from different steps (" +
                 std::to_string(from.begin()->second) + ", " +
                 std::to_string(from.rbegin()->second) + ")");
    }
    kill.resumed = from.begin()->second;
    const auto& resumed = run.output.resumed_from();
    auto source = resumed.find(0);
    kill.resumed_source = source == resumed.end()                     ? "fresh"
                          : source->second.rfind("/dev/shm/", 0) == 0 ? "memory"
                                                                      : "disk";
    if (kill.lost() > 1) {
      trial.fail(what + ": resumed from step " + std::to_string(*kill.resumed) + " (" +
                 kill.resumed_source + ") after step " + std::to_string(kill.printed) +
                 " was printed: " + std::to_string(kill.lost()) + " steps lost");
    }
  }

  KillPlan draw_plan(std::mt19937_64& random, double window, bool from_launch) {
    std::uniform_real_distribution<double> uniform(0.0, 1.0);
    KillPlan plan{KillKind::kOneRank, 0, 0, from_launch};
    const int drawn = std::uniform_int_distribution<int>(0, 2)(random);
    const int kind = c_.only == "rank"       ? 0
                     : c_.only == "all"      ? 1
                     : c_.only == "launcher" ? 2
                                             : drawn;
    plan.kind = kind == 0   ? KillKind::kOneRank
                : kind == 1 ? KillKind::kAllRanks
                            : KillKind::kLauncher;
    plan.rank = std::uniform_int_distribution<int>(0, kRanks - 1)(random);
    plan.delay = uniform(random) * window;
    return plan;
  }

  Trial run_trial(int index) {
    std::seed_seq seeds{static_cast<unsigned long long>(c_.seed),
                        static_cast<unsigned long long>(index)};
    std::mt19937_64 random(seeds);
    Trial trial;
    trial.index = index;
    trial.copy_while_training = index % 2 == 1;
    const std::string id = "mk" + std::to_string(::getpid()) + "-" + std::to_string(index);
    trial.job = "slurm-" + id;
    ::setenv("SLURM_JOB_ID", id.c_str(), 1);
    memory_kills::remove_job_regions(trial.job);
    const Reference& ref = references_[trial.copy_while_training ? 1 : 0];
    const fs::path root = fs::path(c_.work) / ("trial-" + std::to_string(index));
    const fs::path logs = fs::path(c_.work) / "logs";
    auto log_of = [&](const std::string& run) {
      return logs / ("trial-" + std::to_string(index) + "." + run + ".log");
    };

    const KillPlan first = draw_plan(random, ref.training_seconds, false);
    const bool second = std::uniform_real_distribution<double>(0.0, 1.0)(random) < c_.second_kill;
    const KillPlan restart = draw_plan(random, 1.5 * ref.startup_seconds, true);

    long long printed = 0;  // the newest step whose loss line a run of this trial printed
    Run killed = launch(root, trial.copy_while_training, log_of("killed"), first);
    check_end(killed, "the killed run", log_of("killed"), trial);
    check_losses(killed, ref, "the killed run", trial);
    printed = std::max(printed, killed.output.newest_step().value_or(0));
    if (killed.ended_before_kill) {
      trial.notes.push_back("the job ended before the kill (exit code " +
                            std::to_string(killed.exit_code) + ")");
    } else {
      trial.kills.push_back({killed.killed, false, first.delay, printed, std::nullopt, ""});
    }
    if (second && !killed.ended_before_kill) {
      Run again = launch(root, trial.copy_while_training, log_of("restart"), restart);
      check_end(again, "the killed restart", log_of("restart"), trial);
      check_losses(again, ref, "the killed restart", trial);
      observe_resume(again, "the killed restart", trial.kills.back(), trial);
      printed = std::max(printed, again.output.newest_step().value_or(0));
      if (again.ended_before_kill) {
        trial.notes.push_back("the restart ended before the kill");
      } else {
        trial.kills.push_back({again.killed, true, restart.delay, printed, std::nullopt, ""});
      }
    }
    Run last = launch(root, trial.copy_while_training, log_of("final"), std::nullopt);
    check_end(last, "the final run", log_of("final"), trial);
    if (!trial.kills.empty() && !trial.kills.back().resumed) {
      observe_resume(last, "the final run", trial.kills.back(), trial);
    }
    const long long resumed =
        last.output.trains_from().count(0) ? last.output.trains_from().at(0) : 0;
    check_losses(last, ref, "the final run", trial, resumed + 1, c_.steps);
    if (last.exit_code != 0 || last.output.finished_at() != c_.steps) {
      trial.fail("the final run did not finish (exit code " + std::to_string(last.exit_code) +
                 "):\n" + tail_of(log_of("final"), 10));
    } else if (last.output.parameters_hash() != ref.parameters_hash) {
      trial.fail("the final parameters' hash is " + last.output.parameters_hash().value_or("none") +
                 ", uninterrupted " + ref.parameters_hash);
    }
    const auto left = memory_kills::job_regions(trial.job);
    if (!left.empty() && last.exit_code == 0) {
      trial.fail("after the final run " + std::to_string(left.size()) +
                 " /dev/shm files of the job are left (" + left.front() + "...)");
    }
    memory_kills::remove_job_regions(trial.job);
    memory_kills::reap_orphans();
    if (!c_.keep) {
      fs::remove_all(root);
      if (trial.ok()) {
        for (const char* run : {"killed", "restart", "final"}) fs::remove(log_of(run));
      }
    }
    return trial;
  }

  Config c_;
  Reference references_[2];
};

}  // namespace

int main(int argc, char** argv) {
  Config c;
  if (const char* t = std::getenv("DCPP_MEMORY_KILL_TRIALS")) c.trials = std::atoi(t);
  if (const char* s = std::getenv("DCPP_MEMORY_KILL_SEED")) {
    c.seed = std::strtoull(s, nullptr, 10);
  } else {
    c.seed = static_cast<unsigned long long>(
        std::chrono::system_clock::now().time_since_epoch().count() % 1000000007);
  }
  CLI::App app(
      "memory_kill_driver: SIGKILLs a 2-rank job with the memory tier at random moments and checks "
      "that its resume loses at most one step and trains bit for bit as an uninterrupted run");
  app.add_option("--launcher", c.launcher, "dcpp-launch")->required();
  app.add_option("--example", c.example, "memory_tier_resume")->required();
  app.add_option("--work", c.work, "work directory (emptied first)")->required();
  app.add_option("--trials", c.trials, "number of trials (default $DCPP_MEMORY_KILL_TRIALS or 10)");
  app.add_option("--first-trial", c.first_trial, "index of the first trial (to replay one)");
  app.add_option("--seed", c.seed, "random seed (default $DCPP_MEMORY_KILL_SEED or the clock)");
  app.add_option("--steps", c.steps, "steps of the training job");
  app.add_option("--pause-ms", c.pause_ms, "milliseconds each step's compute is made longer");
  app.add_option("--second-kill", c.second_kill, "share of trials whose restart is killed too");
  app.add_option("--run-timeout", c.run_timeout, "seconds a run may take before it counts as hung");
  app.add_option("--orphan-deadline", c.orphan_deadline,
                 "seconds a rank may outlive its SIGKILLed launcher");
  app.add_flag("--keep", c.keep, "keep every trial's root and logs");
  app.add_option("--only", c.only, "every kill of one kind (default: a third each)")
      ->check(CLI::IsMember({"rank", "all", "launcher"}));
  CLI11_PARSE(app, argc, argv);
  try {
    return Driver(c).run();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "memory_kill_driver: %s\n", e.what());
    return 2;
  }
}
