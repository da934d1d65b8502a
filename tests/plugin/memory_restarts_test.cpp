// The memory tier across restarts, with real processes (dcpp-launch, dcpp_memory_worker: every
// step to memory, every 4th to disk): a rollback is never undone by the abandoned run's memory
// steps, a second kill right after a restart loses no more than the step in flight, and a job
// resumed on fewer ranks leaves no region of the departed ranks behind.

#include "dcpp_test.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <regex>

namespace fs = std::filesystem;
using dcpp::test::CommandResult;
using dcpp::test::run_command;
using dcpp::test::TempDir;

namespace {

// A memory tier's job name of its own for each test (regions in this host's /dev/shm).
std::string unique_job(const std::string& name) {
  return "restarts-" + name + "-" + std::to_string(::getpid());
}

// The job's regions in /dev/shm, and its ranks' lock files.
std::vector<std::string> regions_of(const std::string& job) {
  std::vector<std::string> found;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator("/dev/shm", error)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("dcpp." + job + ".", 0) == 0 || name.rfind("dcpp-job." + job + ".", 0) == 0) {
      found.push_back(name);
    }
  }
  return found;
}

void remove_regions(const std::string& job) {
  for (const std::string& name : regions_of(job)) fs::remove(fs::path("/dev/shm") / name);
}

struct RegionsRemoved {
  std::string job;
  ~RegionsRemoved() { remove_regions(job); }
};

CommandResult run_job(int ranks, const fs::path& root, int steps, const std::string& job,
                      const std::string& args = "") {
  return run_command(std::string(DCPP_LAUNCH) + " -n " + std::to_string(ranks) + " -- " +
                     DCPP_MEMORY_WORKER + " " + root.string() + " " + std::to_string(steps) +
                     " --job " + job + " " + args + " 2>&1");
}

// "step S value V" lines, by step.
std::map<int, std::string> values_of(const std::string& output) {
  std::map<int, std::string> values;
  const std::regex line("step ([0-9]+) value ([-0-9a-fx.p+]+)");
  for (auto it = std::sregex_iterator(output.begin(), output.end(), line);
       it != std::sregex_iterator(); ++it) {
    values[std::stoi((*it)[1])] = (*it)[2];
  }
  return values;
}

// The step rank 0 resumed at and where from ("" and -1: a fresh start).
std::pair<int, std::string> resumed(const std::string& output) {
  std::smatch found;
  if (!std::regex_search(output, found,
                         std::regex("rank 0 resumed from '([^']*)' at step ([0-9]+)"))) {
    return {-1, ""};
  }
  return {std::stoi(found[2]), found[1]};
}

// Each step's value of an uninterrupted run of `steps` on `ranks` ranks.
std::map<int, std::string> uninterrupted(const fs::path& dir, int ranks, int steps) {
  const std::string job = unique_job("whole");
  RegionsRemoved cleanup{job};
  const CommandResult whole = run_job(ranks, dir / "whole", steps, job);
  INFO(whole.output);
  REQUIRE(whole.exit_code == 0);
  return values_of(whole.output);
}

// The values `output` printed from step `first` on equal `expected`'s, which has them all.
void check_values_from(const std::string& output, int first,
                       const std::map<int, std::string>& expected) {
  const std::map<int, std::string> values = values_of(output);
  REQUIRE(values.count(first) == 1);
  for (const auto& [step, value] : values) {
    if (step < first) continue;
    INFO("step " << step);
    CHECK(value == expected.at(step));
  }
}

}  // namespace

TEST_CASE("a crash after a rollback resumes the rolled-back run, not the abandoned one") {
  TempDir dir;
  const fs::path root = dir.path() / "root";
  const std::string job = unique_job("rollback");
  RegionsRemoved cleanup{job};
  const std::map<int, std::string> expected = uninterrupted(dir.path(), 2, 8);

  // Run A ends step 12 on both ranks (disk steps 4, 8, 12; memory 11 and 12) and dies in 13.
  const CommandResult a = run_job(2, root, 20, job, "--die-at 13 --die-how mid");
  INFO(a.output);
  REQUIRE(a.exit_code != 0);
  REQUIRE(values_of(a.output).count(12) == 1);
  // Run B rolls back to step 4, ends step 5 on both ranks (in memory, beside A's step 12 in
  // each rank's other slot) and dies in step 6, before any disk save of its own.
  const CommandResult b =
      run_job(2, root, 20, job,
              "--rollback-to " + (root / dcpp::step_directory_name(4)).string() +
                  " --die-at 6 --die-how mid");
  INFO(b.output);
  REQUIRE(b.exit_code != 0);
  REQUIRE(resumed(b.output).first == 4);
  // A plain restart resumes run B's step 5 from memory: A's steps 8 and 12, on disk and in
  // memory, are abandoned by it.
  const CommandResult c = run_job(2, root, 8, job);
  INFO(c.output);
  REQUIRE(c.exit_code == 0);
  const auto [step, from] = resumed(c.output);
  CHECK(step == 5);
  CHECK(from.rfind("/dev/shm/", 0) == 0);
  check_values_from(c.output, 6, expected);
}

TEST_CASE("a second kill during the restart's first memory copy resumes the step resumed before") {
  TempDir dir;
  const fs::path root = dir.path() / "root";
  const std::string job = unique_job("second-kill");
  RegionsRemoved cleanup{job};
  const std::map<int, std::string> expected = uninterrupted(dir.path(), 2, 14);

  // Rank 0 ends step 11 (its slots: 10 and 11), rank 1 dies before (its slots: 9 and 10): the
  // restart resumes step 10 from memory (disk holds 8).
  const std::string die = "--die-at 11 --die-rank 1 --die-how alone";
  const CommandResult first = run_job(2, root, 14, job, die);
  INFO(first.output);
  REQUIRE(first.exit_code != 0);
  // The same death again in the restart: rank 0 writes its step 11 anew, and must keep step 10,
  // the newest step every rank holds, rather than the killed run's step 11.
  const CommandResult second = run_job(2, root, 14, job, die);
  INFO(second.output);
  REQUIRE(second.exit_code != 0);
  REQUIRE(resumed(second.output).first == 10);
  const CommandResult third = run_job(2, root, 14, job);
  INFO(third.output);
  REQUIRE(third.exit_code == 0);
  const auto [step, from] = resumed(third.output);
  CHECK(step == 10);
  CHECK(from.rfind("/dev/shm/", 0) == 0);
  check_values_from(third.output, 11, expected);
}

TEST_CASE("a job resumed on fewer ranks removes the departed ranks' regions when it ends") {
  TempDir dir;
  const fs::path root = dir.path() / "root";
  const std::string job = unique_job("shrink");
  RegionsRemoved cleanup{job};
  // 4 ranks end step 6 (memory), die in step 7; 2 ranks resume step 6, resharded from memory,
  // and end cleanly (the last step on disk): no region of the job is left, of any rank, nor a
  // lock file.
  const CommandResult four = run_job(4, root, 10, job, "--die-at 7 --die-how mid");
  INFO(four.output);
  REQUIRE(four.exit_code != 0);
  const std::vector<std::string> left = regions_of(job);
  REQUIRE(std::count_if(left.begin(), left.end(), [](const std::string& name) {
            return name.rfind("dcpp.", 0) == 0;
          }) == 4 * 2);  // two slots a rank (and the lock files of the ranks that were killed)
  const CommandResult two = run_job(2, root, 10, job);
  INFO(two.output);
  REQUIRE(two.exit_code == 0);
  const auto [step, from] = resumed(two.output);
  CHECK(step == 6);
  CHECK(from.rfind("/dev/shm/", 0) == 0);
  CHECK(regions_of(job).empty());
}
