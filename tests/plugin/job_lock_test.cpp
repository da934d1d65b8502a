// Two live copies of one job never share a root (issue 60): a CheckpointManager on a root a live
// manager holds is refused on every rank, naming the holder (host, pid, since when) and what to
// do; a holder killed with SIGKILL holds nothing (the kernel drops the lock). The other process is
// a real one: a job of tests/plugin/worker/job_lock_worker.cpp started with dcpp-launch.

#include "dcpp_test.h"

#include "background_process.h"

#include <dcpp/plugin/checkpoint_manager.h>

#include <unistd.h>

#include <filesystem>
#include <string>

namespace fs = std::filesystem;
using dcpp::test::TempDir;

namespace {

std::string this_host() {
  char name[256] = {};
  ::gethostname(name, sizeof(name) - 1);
  return name;
}

dcpp::CheckpointManagerOptions one_process_manager(const fs::path& root) {
  dcpp::CheckpointManagerOptions options;
  options.with_root(root).with_async(false);
  return options;
}

// The refusal's parts: the root, the holder and what to do.
void check_names_holder(const std::string& message, const std::string& root,
                        const std::string& holder) {
  CHECK_THAT(message,
             Catch::Contains("checkpoint root '" + root + "' is in use by another live job"));
  CHECK_THAT(message, Catch::Contains(holder + ", since "));
  CHECK_THAT(message, Catch::Contains(" UTC ("));
  CHECK_THAT(message, Catch::Contains(root + "/.dcpp-job.lock"));
  CHECK_THAT(message, Catch::Contains("Stop the other job"));
  CHECK_THAT(message, Catch::Contains("give this one another root"));
}

}  // namespace

TEST_CASE("managers of one process on one root share its lock, released by the last to end") {
  // One job: the ranks of a test run as threads, a second manager reading what the first saved.
  TempDir dir;
  const fs::path root = dir / "ckpt";
  {
    dcpp::CheckpointManager first(one_process_manager(root));
    REQUIRE(fs::exists(root / ".dcpp-job.lock"));
    { dcpp::CheckpointManager second(one_process_manager(dir.path() / "." / "ckpt")); }
    CHECK(fs::exists(root / ".dcpp-job.lock"));  // the first still holds it
  }
  CHECK_FALSE(fs::exists(root / ".dcpp-job.lock"));  // released with the last manager
}

#ifdef DCPP_JOB_LOCK_WORKER

namespace {

const std::string kWorker = DCPP_JOB_LOCK_WORKER;
constexpr std::chrono::seconds kStartBound{200};  // 2 ranks' start-up under a sanitizer, loaded

// `dcpp-launch --fork -n 2 -- job_lock_worker ROOT MODE [MEMORY_JOB]`.
std::vector<std::string> job(const std::string& root, const std::string& mode,
                             const std::string& memory_job = "") {
  std::vector<std::string> argv{DCPP_LAUNCH, "--fork", "-n", "2", "--", kWorker, root, mode};
  if (!memory_job.empty()) argv.push_back(memory_job);
  return argv;
}

std::string shell_command(const std::vector<std::string>& argv) {
  std::string command;
  for (const std::string& arg : argv) command += (command.empty() ? "'" : " '") + arg + "'";
  return command;
}

}  // namespace

TEST_CASE("a second live job on a root is refused on every rank, naming the first, until it dies") {
  TempDir dir;
  const std::string root = (dir / "ckpt").string();
  dcpp::test::WatchedProcesses first_ranks;
  dcpp::test::BackgroundProcess first(job(root, "hold"));
  const auto pids = first.read_until(R"(rank [01]: holding .*, pid ([0-9]+)$)", 2, kStartBound);
  INFO(first.output());
  REQUIRE(pids.size() == 2);
  for (const std::string& pid : pids)
    REQUIRE(first_ranks.watch(static_cast<pid_t>(std::stol(pid))));
  const auto rank_0 = first.output().find("[rank 0] rank 0: holding");
  REQUIRE(rank_0 != std::string::npos);
  const std::string holder_pid =
      std::to_string(std::stol(first.output().substr(first.output().find(", pid ", rank_0) + 6)));
  // The coordinator (rank 0) holds the root for its job.
  const std::string holder = "pid " + holder_pid + " on host " + this_host();

  SECTION("a manager of this process") {
    const dcpp::CheckpointError error =
        dcpp::test::error_of([&] { dcpp::CheckpointManager second(one_process_manager(root)); });
    CHECK(error.kind() == dcpp::ErrorKind::kUsage);
    INFO(error.what());
    check_names_holder(error.what(), root, holder);
    CHECK_THAT(error.what(), !Catch::Contains("this process"));
  }
  SECTION("every rank of a second job") {
    const auto second = dcpp::test::run_command(shell_command(job(root, "once")) + " 2>&1");
    INFO(second.output);
    CHECK(second.exit_code == 3);
    CHECK_THAT(second.output, !Catch::Contains(": holding"));
    for (const std::string rank : {"0", "1"}) {
      const std::string prefix = "[rank " + rank + "] rank " + rank + ": refused (usage): ";
      const auto at = second.output.find(prefix);
      REQUIRE(at != std::string::npos);
      const std::string line = second.output.substr(at, second.output.find('\n', at) - at);
      CHECK_THAT(line, Catch::Contains("CheckpointManager on root '" + root +
                                       "' cannot start while another live job uses its files"));
      check_names_holder(line, root, holder);
    }
  }

  // Killed with SIGKILL, the first job holds nothing: the next one starts, taking over the lock
  // file it left.
  first_ranks.kill_all();
  first.kill_and_reap();
  CHECK(fs::exists(fs::path(root) / ".dcpp-job.lock"));
  { dcpp::CheckpointManager next(one_process_manager(root)); }
  const auto next_job = dcpp::test::run_command(shell_command(job(root, "once")) + " 2>&1");
  INFO(next_job.output);
  CHECK(next_job.exit_code == 0);
  CHECK_THAT(next_job.output, Catch::Contains("[rank 1] rank 1: holding " + root));
}

TEST_CASE("a live job's memory tier is refused to a job of another root with its job name") {
  TempDir dir;
  const std::string memory_job = "job-lock-test-" + std::to_string(::getpid());
  dcpp::test::WatchedProcesses first_ranks;
  dcpp::test::BackgroundProcess first(job((dir / "first").string(), "hold", memory_job));
  const auto pids = first.read_until(R"(rank [01]: holding .*, pid ([0-9]+)$)", 2, kStartBound);
  INFO(first.output());
  REQUIRE(pids.size() == 2);
  for (const std::string& pid : pids)
    REQUIRE(first_ranks.watch(static_cast<pid_t>(std::stol(pid))));

  dcpp::CheckpointManagerOptions options = one_process_manager(dir / "second");
  options.memory.every_steps = 1;
  options.memory.job = memory_job;
  const dcpp::CheckpointError error =
      dcpp::test::error_of([&] { dcpp::CheckpointManager second(options); });
  CHECK(error.kind() == dcpp::ErrorKind::kUsage);
  INFO(error.what());
  CHECK_THAT(error.what(),
             Catch::Contains("the memory tier '" + memory_job +
                             "' of rank 0 is in use on this host by another live job"));
  CHECK_THAT(error.what(), Catch::Contains("on host " + this_host() + ", since "));
  CHECK_THAT(error.what(), Catch::Contains("give this one another MemoryTierOptions::job"));

  first_ranks.kill_all();
  first.kill_and_reap();
  {
    dcpp::CheckpointManager second(options);  // the killed job's lock is gone
    second.release_memory();
  }
  for (const auto& entry : fs::directory_iterator("/dev/shm")) {  // what the killed job left
    if (entry.path().filename().string().find(memory_job) != std::string::npos) {
      fs::remove(entry.path());
    }
  }
}

#endif  // DCPP_JOB_LOCK_WORKER
