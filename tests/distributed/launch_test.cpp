// dcpp-launch and the Gloo process group helper: real processes, Gloo on loopback.

#include "dcpp_test.h"

#include "background_process.h"
#include "launch/launcher.h"

#include <dcpp/core/checkpoint_error.h>
#include <dcpp/dist/process_group.h>
#include <dcpp/version.h>

#include <torch/csrc/distributed/c10d/HashStore.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>

namespace {

using Clock = std::chrono::steady_clock;

using dcpp::test::CommandResult;

CommandResult run(const std::string& arguments) {
  const std::string command = std::string(DCPP_LAUNCH) + " " + arguments;
  CommandResult result = dcpp::test::run_command(command);
  UNSCOPED_INFO(command << "\n" << result.output);
  return result;
}

const std::string worker = DCPP_PG_WORKER;

// The tests of the launcher's own work (the variables, output, exit codes, stopping) run with the
// ranks started one by one and forked from one started worker (--fork), which must behave alike;
// those of what Gloo does when a peer fails, with forked ranks only (a start costs a rank most of
// a second of CPU, several under a sanitizer).

// The bounds on how long a failure takes separate "failed by its own timeout or signal" from what
// would happen without it (a rank blocked for minutes, SIGKILL after a long grace period) with a
// wide margin: under ThreadSanitizer on 2 loaded cores, starting 3 ranks alone takes over 15 s.
constexpr double kLaunchBoundSeconds = 200;

// For a test of a short collective timeout: the ranks meet on the store (within 2 minutes) before
// they make their groups, so how far apart they start (seconds under ASan on busy cores: a rank
// once gave up on reaching rank 0's store after 2 s) is not what the timeout measures.
const std::string kStartTogether = " --startup-ms 120000";

// How long after its main() began `rank` failed, from the worker's "failed after T ms" line.
long failed_after_ms(const std::string& output, int rank) {
  const std::string marker =
      "[rank " + std::to_string(rank) + "] rank " + std::to_string(rank) + ": failed after ";
  const auto at = output.find(marker);
  REQUIRE(at != std::string::npos);
  return std::stol(output.substr(at + marker.size()));
}

// Sets (or unsets, with nullopt) environment variables for a scope, restoring them after.
class ScopedEnv {
 public:
  explicit ScopedEnv(const std::map<std::string, std::optional<std::string>>& values) {
    for (const auto& [name, value] : values) {
      const char* old = std::getenv(name.c_str());
      saved_[name] = old ? std::optional<std::string>(old) : std::nullopt;
      set(name, value);
    }
  }
  ~ScopedEnv() {
    for (const auto& [name, value] : saved_) set(name, value);
  }

 private:
  static void set(const std::string& name, const std::optional<std::string>& value) {
    if (value) {
      ::setenv(name.c_str(), value->c_str(), 1);
    } else {
      ::unsetenv(name.c_str());
    }
  }
  std::map<std::string, std::optional<std::string>> saved_;
};

std::map<std::string, std::optional<std::string>> torchrun_env() {
  return {{"RANK", "1"},
          {"WORLD_SIZE", "3"},
          {"LOCAL_RANK", "1"},
          {"MASTER_ADDR", "127.0.0.1"},
          {"MASTER_PORT", "29512"}};
}

// The launcher's output to a file, read back after.
struct CapturedLaunch {
  int exit_code;
  std::string out;
  std::string err;
  double seconds;
};

CapturedLaunch launch_in_process(dcpp::tools::LaunchOptions options) {
  dcpp::test::TempDir dir;
  const int out = ::open((dir / "out").c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  const int err = ::open((dir / "err").c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  REQUIRE(out >= 0);
  REQUIRE(err >= 0);
  options.stdout_fd = out;
  options.stderr_fd = err;
  const auto start = Clock::now();
  const int code = dcpp::tools::launch(options);
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  ::close(out);
  ::close(err);
  return {code, dcpp::test::read_file(dir / "out"), dcpp::test::read_file(dir / "err"), seconds};
}

}  // namespace

TEST_CASE("LaunchEnvironment::from_env reads the torchrun variables") {
  ScopedEnv env(torchrun_env());
  const auto launch = dcpp::LaunchEnvironment::from_env();
  REQUIRE(launch.rank == 1);
  REQUIRE(launch.world_size == 3);
  REQUIRE(launch.local_rank == 1);
  REQUIRE(launch.master_addr == "127.0.0.1");
  REQUIRE(launch.master_port == 29512);
}

TEST_CASE("LaunchEnvironment::from_env names the missing or invalid variable") {
  const std::vector<std::pair<std::map<std::string, std::optional<std::string>>, std::string>>
      cases = {
          {{{"RANK", std::nullopt}}, "RANK is not set"},
          {{{"WORLD_SIZE", std::nullopt}}, "WORLD_SIZE is not set"},
          {{{"MASTER_ADDR", std::nullopt}}, "MASTER_ADDR is not set"},
          {{{"MASTER_PORT", ""}}, "MASTER_PORT is not set"},
          {{{"RANK", "one"}}, "RANK=\"one\" is not an integer"},
          {{{"WORLD_SIZE", "3x"}}, "WORLD_SIZE=\"3x\" is not an integer"},
          {{{"RANK", "3"}}, "RANK=3 is outside [0, WORLD_SIZE=3)"},
          {{{"WORLD_SIZE", "0"}}, "WORLD_SIZE=0 must be at least 1"},
          {{{"MASTER_PORT", "70000"}}, "MASTER_PORT=70000 is outside [1, 65535]"},
          {{{"LOCAL_RANK", "-1"}}, "LOCAL_RANK=-1 is negative"},
      };
  for (const auto& [change, message] : cases) {
    ScopedEnv base(torchrun_env());
    ScopedEnv env(change);
    INFO(message);
    REQUIRE_THROWS_WITH(dcpp::LaunchEnvironment::from_env(), Catch::Contains(message));
  }
  ScopedEnv base(torchrun_env());
  ScopedEnv without_local_rank({{"LOCAL_RANK", std::nullopt}});
  REQUIRE(dcpp::LaunchEnvironment::from_env().local_rank == 1);  // RANK's value
}

TEST_CASE("A one-rank Gloo group from the environment runs collectives in-process") {
  ScopedEnv env({{"RANK", "0"},
                 {"WORLD_SIZE", "1"},
                 {"LOCAL_RANK", "0"},
                 {"MASTER_ADDR", "127.0.0.1"},
                 {"MASTER_PORT", std::to_string(dcpp::tools::pick_free_port())}});
  const auto group = dcpp::make_gloo_process_group_from_env(
      dcpp::ProcessGroupOptions().with_timeout(std::chrono::seconds(20)));
  REQUIRE(group->getRank() == 0);
  REQUIRE(group->getSize() == 1);
  std::vector<at::Tensor> tensors{at::arange(5, at::kFloat)};
  group->allreduce(tensors)->wait();
  REQUIRE(tensors[0].equal(at::arange(5, at::kFloat)));
}

TEST_CASE("make_gloo_process_group leaves the caller's store timeout as it was") {
  auto store = c10::make_intrusive<c10d::HashStore>();
  store->setTimeout(std::chrono::milliseconds(123456));
  const auto group = dcpp::make_gloo_process_group(
      store, 0, 1, dcpp::ProcessGroupOptions().with_timeout(std::chrono::seconds(7)));
  REQUIRE(store->getTimeout() == std::chrono::milliseconds(123456));
  std::vector<at::Tensor> tensors{at::arange(3, at::kFloat)};
  group->allreduce(tensors)->wait();  // the group works through its own view of the store
  REQUIRE(tensors[0].equal(at::arange(3, at::kFloat)));
}

// Gloo writes to its sockets without MSG_NOSIGNAL: with SIGPIPE at its default, a peer that died
// ended a surviving rank silently (tests/reshard, "a rank killed while saving", now and then).
TEST_CASE(
    "A Gloo group ignores SIGPIPE so a broken pipe fails a write instead of ending the rank") {
  std::signal(SIGPIPE, SIG_DFL);
  auto store = c10::make_intrusive<c10d::HashStore>();
  const auto group = dcpp::make_gloo_process_group(store, 0, 1);
  std::array<int, 2> ends{};
  REQUIRE(::pipe(ends.data()) == 0);
  ::close(ends[0]);
  const char byte = 'x';
  const ssize_t written = ::write(ends[1], &byte, 1);  // killed here without the fix
  const int error = errno;
  ::close(ends[1]);
  REQUIRE(written == -1);
  REQUIRE(error == EPIPE);
}

namespace {
void count_broken_pipe(int) {}
}  // namespace

TEST_CASE("A Gloo group keeps the program's own SIGPIPE handler") {
  std::signal(SIGPIPE, count_broken_pipe);
  auto store = c10::make_intrusive<c10d::HashStore>();
  const auto group = dcpp::make_gloo_process_group(store, 0, 1);
  struct sigaction current {};
  REQUIRE(::sigaction(SIGPIPE, nullptr, &current) == 0);
  REQUIRE(current.sa_handler == &count_broken_pipe);
  std::signal(SIGPIPE, SIG_DFL);
}

TEST_CASE("make_gloo_process_group rejects bad arguments") {
  REQUIRE_THROWS_WITH(dcpp::make_gloo_process_group(c10::intrusive_ptr<c10d::Store>(), 0, 1),
                      Catch::Contains("the store is null"));
  dcpp::LaunchEnvironment env;
  env.rank = 2;
  env.world_size = 2;
  REQUIRE_THROWS_WITH(dcpp::make_gloo_process_group(env), Catch::Contains("RANK=2 is outside"));
}

TEST_CASE("LinePrefixer writes whole prefixed lines") {
  dcpp::test::TempDir dir;
  const int fd = ::open((dir / "out").c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  REQUIRE(fd >= 0);
  {
    dcpp::tools::LinePrefixer lines("[rank 2] ", fd);
    lines.feed("one\ntw", 6);
    lines.feed("o\n\nthr", 6);
    lines.feed("ee", 2);
    lines.finish();
    lines.finish();  // nothing more
  }
  ::close(fd);
  REQUIRE(dcpp::test::read_file(dir / "out") ==
          "[rank 2] one\n[rank 2] two\n[rank 2] \n[rank 2] three\n");
}

TEST_CASE("LinePrefixer writes a line without end in pieces") {
  dcpp::test::TempDir dir;
  const int fd = ::open((dir / "out").c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  REQUIRE(fd >= 0);
  const std::string chunk(dcpp::tools::LinePrefixer::kMaxLine / 2 + 1, 'x');
  {
    dcpp::tools::LinePrefixer lines("> ", fd);
    lines.feed(chunk.data(), chunk.size());
    lines.feed(chunk.data(), chunk.size());  // over the limit: written
    lines.feed("y\n", 2);
  }
  ::close(fd);
  REQUIRE(dcpp::test::read_file(dir / "out") == "> " + chunk + chunk + "\n> y\n");
}

TEST_CASE("launch() sets the torchrun variables and prefixes each rank's output") {
  dcpp::tools::LaunchOptions options;
  options.nproc = 3;
  options.master_port = 29777;
  options.command = {"sh", "-c",
                     "echo \"$RANK $LOCAL_RANK $WORLD_SIZE $MASTER_ADDR $MASTER_PORT\"; "
                     "printf 'partial' >&2"};
  const auto result = launch_in_process(options);
  REQUIRE(result.exit_code == 0);
  for (int r = 0; r < 3; ++r) {
    const std::string rank = std::to_string(r);
    REQUIRE_THAT(result.out, Catch::Contains("[rank " + rank + "] " + rank + " " + rank +
                                             " 3 127.0.0.1 29777\n"));
    REQUIRE_THAT(result.err, Catch::Contains("[rank " + rank + "] partial\n"));
  }
}

TEST_CASE("launch() as node 1 of 3 starts that node's ranks of the whole world") {
  dcpp::tools::LaunchOptions options;
  options.nproc = 2;
  options.nnodes = 3;
  options.node_rank = 1;
  options.master_addr = "10.0.0.7";
  options.master_port = 29778;
  options.command = {"sh", "-c",
                     "echo \"$RANK $LOCAL_RANK $WORLD_SIZE $LOCAL_WORLD_SIZE $GROUP_RANK "
                     "$MASTER_ADDR $MASTER_PORT\""};
  const auto result = launch_in_process(options);
  REQUIRE(result.exit_code == 0);
  CHECK_THAT(result.out, Catch::Contains("[rank 2] 2 0 6 2 1 10.0.0.7 29778\n"));
  CHECK_THAT(result.out, Catch::Contains("[rank 3] 3 1 6 2 1 10.0.0.7 29778\n"));
  CHECK_THAT(result.out, !Catch::Contains("[rank 0]"));

  options.master_port = 0;  // every node must agree on it: no free port of one's own
  CHECK_THROWS_WITH(dcpp::tools::launch(options), Catch::Contains("--master-port"));
  options.master_port = 29778;
  options.node_rank = 3;
  CHECK_THROWS_WITH(dcpp::tools::launch(options), Catch::Contains("node rank"));
}

TEST_CASE("launch() returns the first failure's code and stops the other ranks") {
  dcpp::tools::LaunchOptions options;
  options.nproc = 3;
  options.command = {"sh", "-c", "if [ $RANK = 1 ]; then exit 3; fi; exec sleep 600"};
  const auto result = launch_in_process(options);
  REQUIRE(result.exit_code == 3);
  REQUIRE(result.seconds < kLaunchBoundSeconds);
  REQUIRE_THAT(result.err, Catch::Contains("rank 1 exited with code 3; stopping the other ranks"));
}

TEST_CASE("launch() kills ranks that ignore SIGTERM once the grace period is over") {
  dcpp::tools::LaunchOptions options;
  options.nproc = 2;
  options.stop_grace = std::chrono::milliseconds(300);
  // Rank 1 (the shell and its sleep) ignores SIGTERM; the whole process group gets SIGKILL. Rank
  // 0 fails once rank 1 ignores SIGTERM: it reads what rank 1 writes after its trap.
  dcpp::test::TempDir dir;
  const std::string fifo = (dir / "ready").string();
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  options.command = {"sh", "-c",
                     "if [ $RANK = 0 ]; then read line < " + fifo +
                         "; exit 5; fi; trap '' TERM; echo ready > " + fifo + "; sleep 600"};
  const auto result = launch_in_process(options);
  REQUIRE(result.exit_code == 5);
  REQUIRE(result.seconds >= 0.3);
  REQUIRE(result.seconds < kLaunchBoundSeconds);
}

TEST_CASE("launch() reports a rank killed by a signal as 128 + the signal") {
  dcpp::tools::LaunchOptions options;
  options.nproc = 2;
  options.command = {"sh", "-c", "if [ $RANK = 1 ]; then kill -9 $$; fi; exec sleep 600"};
  const auto result = launch_in_process(options);
  REQUIRE(result.exit_code == 128 + 9);
  REQUIRE_THAT(result.err, Catch::Contains("rank 1 was killed by signal 9"));
}

TEST_CASE("launch() fails with 127 when the command cannot be run") {
  dcpp::tools::LaunchOptions options;
  options.nproc = 2;
  options.command = {"/nonexistent/dcpp-no-such-program"};
  const auto result = launch_in_process(options);
  REQUIRE(result.exit_code == 127);
  REQUIRE_THAT(result.err, Catch::Contains("could not run /nonexistent/dcpp-no-such-program"));
  options.nproc = 0;
  REQUIRE_THROWS_AS(dcpp::tools::launch(options), std::invalid_argument);
}

TEST_CASE("dcpp-launch --version prints dcpp's version and starts nothing") {
  const CommandResult version = run("--version");
  REQUIRE(version.exit_code == 0);
  REQUIRE(version.output == std::string("dcpp-launch ") + DCPP_VERSION + "\n");
}

TEST_CASE("dcpp-launch -n 3 runs Gloo collectives on two groups from one store") {
  const std::string mode = GENERATE(as<std::string>{}, "", "--fork ");
  const auto result = run(mode + "-n 3 -- " + worker + " --timeout-ms 60000");
  INFO(result.output);
  REQUIRE(result.exit_code == 0);
  for (int r = 0; r < 3; ++r) {
    const std::string prefix = "[rank " + std::to_string(r) + "] rank " + std::to_string(r);
    REQUIRE_THAT(result.output, Catch::Contains(prefix + ": groups ready, world size 3\n"));
    REQUIRE_THAT(result.output, Catch::Contains(prefix + ": default allreduce ok 6\n"));
    REQUIRE_THAT(result.output, Catch::Contains(prefix + ": default allgather ok\n"));
    REQUIRE_THAT(result.output, Catch::Contains(prefix + ": checkpoint allreduce ok 6\n"));
    REQUIRE_THAT(result.output, Catch::Contains(prefix + ": checkpoint allgather ok\n"));
    REQUIRE_THAT(result.output, Catch::Contains(prefix + ": done\n"));
  }
}

TEST_CASE("dcpp-launch with a given port, the group made by make_gloo_process_group_from_env") {
  const int port = dcpp::tools::pick_free_port();
  const auto result =
      run("--fork -n 2 --master-port " + std::to_string(port) + " " + worker + " --from-env");
  INFO(result.output);
  REQUIRE(result.exit_code == 0);
  REQUIRE_THAT(result.output, Catch::Contains("[rank 1] rank 1: default allreduce ok 3\n"));
}

TEST_CASE("A line a rank printed before it crashed is forwarded") {
  const std::string mode = GENERATE(as<std::string>{}, "", "--fork ");
  // Its stdout is a pseudo-terminal, which the C library line-buffers; a pipe would be
  // block-buffered and the line lost with the process.
  const int probe = ::posix_openpt(O_RDWR | O_NOCTTY);
  if (probe < 0) {
#ifdef DCPP_CATCH2_V3
    SKIP("no pseudo-terminal here (no /dev/pts): dcpp-launch falls back to pipes");
#else
    WARN("skipped: no pseudo-terminal here (no /dev/pts): dcpp-launch falls back to pipes");
    return;
#endif
  }
  ::close(probe);
  // One rank: with two, the first to abort makes the launcher stop the other, maybe before it
  // printed (seen under ASan, whose start-up is slow).
  const auto result = run(mode + "-n 1 " + worker + " --print-and-abort");
  REQUIRE(result.exit_code == 128 + SIGABRT);
  REQUIRE_THAT(result.output, Catch::Contains("[rank 0] rank 0: printed before a crash\n"));
  REQUIRE_THAT(result.output, !Catch::Contains("\r"));  // raw mode: lines end as printed
}

TEST_CASE("A rank that exits 3 makes dcpp-launch exit 3 and stops the blocked ranks") {
  const std::string mode = GENERATE(as<std::string>{}, "", "--fork ");
  // Ranks 0 and 2 would wait 10 minutes in their allreduce: the launcher's SIGTERM stops them.
  const auto result =
      run(mode + "-n 3 --timeout 5 " + worker + " --timeout-ms 600000 --exit-rank 1 --exit-code 3");
  INFO(result.output);
  REQUIRE(result.exit_code == 3);
  REQUIRE(result.seconds < kLaunchBoundSeconds);
  REQUIRE_THAT(result.output, Catch::Contains("[rank 1] rank 1: exiting with 3"));
  REQUIRE_THAT(result.output,
               Catch::Contains("dcpp-launch: rank 1 exited with code 3; stopping the other ranks"));
  REQUIRE_THAT(result.output, !Catch::Contains(": done"));
}

TEST_CASE("Ranks that ignore SIGTERM fail on their own when a peer exits") {
  // No SIGTERM stops them and the launcher grants 10 minutes: their collectives must fail by
  // themselves, within the group's timeout.
  const auto result = run("--fork -n 3 --timeout 600 " + worker + kStartTogether +
                          " --ignore-sigterm --timeout-ms 3000 --exit-rank 1 --exit-code 3");
  INFO(result.output);
  REQUIRE(result.exit_code == 3);
  REQUIRE(result.seconds < kLaunchBoundSeconds);
  REQUIRE(failed_after_ms(result.output, 0) < kLaunchBoundSeconds * 1000);
  REQUIRE(failed_after_ms(result.output, 2) < kLaunchBoundSeconds * 1000);
}

TEST_CASE("A rank that dies makes the others' collectives fail within the timeout") {
  const auto result = run("--fork -n 3 --timeout 600 " + worker + kStartTogether +
                          " --ignore-sigterm --timeout-ms 3000 --die-rank 1");
  INFO(result.output);
  REQUIRE(result.exit_code == 128 + 9);
  REQUIRE(result.seconds < kLaunchBoundSeconds);
  REQUIRE_THAT(result.output, Catch::Contains("rank 1 was killed by signal 9"));
  for (const std::string rank : {"0", "2"}) {
    const auto at = result.output.find("[rank " + rank + "] rank " + rank + ": failed after ");
    REQUIRE(at != std::string::npos);
    const std::string error = result.output.substr(at, result.output.find('\n', at) - at);
    INFO(error);
    const bool names_cause =
        error.find("imed out") != std::string::npos || error.find("timeout") != std::string::npos ||
        error.find("peer") != std::string::npos || error.find("Connection") != std::string::npos;
    REQUIRE(names_cause);
  }
}

TEST_CASE("A rank that hangs makes the others' collectives time out") {
  // Rank 1 would hang 5 minutes; the others' collectives give up after 2 s.
  const auto result =
      run("--fork -n 3 " + worker + kStartTogether + " --timeout-ms 2000 --hang-rank 1");
  INFO(result.output);
  REQUIRE(result.exit_code == 4);
  REQUIRE(result.seconds < kLaunchBoundSeconds);
  REQUIRE_THAT(result.output, Catch::Contains("[rank 1] rank 1: hanging"));
  // Ranks 0 and 2 time out together; the first to exit makes the launcher stop the other, maybe
  // before that one printed its failure.
  const bool rank_0_failed =
      result.output.find("[rank 0] rank 0: failed after ") != std::string::npos;
  REQUIRE(failed_after_ms(result.output, rank_0_failed ? 0 : 2) >= 2000);
  REQUIRE_THAT(result.output, Catch::Contains("imed out"));
  REQUIRE_THAT(result.output, Catch::Contains("exited with code 4; stopping the other ranks"));
}

TEST_CASE("A rank that never joins makes the rendezvous fail within the timeout") {
  const auto result = run("--fork -n 2 " + worker + " --timeout-ms 2000 --absent-rank 1");
  INFO(result.output);
  REQUIRE(result.exit_code == 4);
  REQUIRE(result.seconds < kLaunchBoundSeconds);
  REQUIRE_THAT(result.output, Catch::Contains("[rank 1] rank 1: not joining"));
  REQUIRE(failed_after_ms(result.output, 0) >= 2000);
  // The store's or Gloo's rendezvous, whichever waits for the missing rank first.
  REQUIRE_THAT(result.output, Catch::Contains(" ms: rank 0"));
  REQUIRE_THAT(result.output, Catch::Contains("within 2000 ms"));
}

TEST_CASE("dcpp-launch --fork: forked ranks hand over what stdio buffered when they exit") {
  // Pipes, not pseudo-terminals: each rank's stdout is block-buffered, so its lines reach the
  // launcher only when the rank ends (forked ranks end without libtorch's teardown).
  dcpp::tools::LaunchOptions options;
  options.nproc = 3;
  options.fork = true;
  options.stdout_terminal = false;
  options.command = {worker, "--timeout-ms", "60000"};
  const auto result = launch_in_process(options);
  INFO(result.out << result.err);
  REQUIRE(result.exit_code == 0);
  for (int r = 0; r < 3; ++r) {
    const std::string prefix = "[rank " + std::to_string(r) + "] rank " + std::to_string(r);
    REQUIRE_THAT(result.out, Catch::Contains(prefix + ": groups ready, world size 3\n"));
    REQUIRE_THAT(result.out, Catch::Contains(prefix + ": done\n"));
  }
}

TEST_CASE("dcpp-launch --fork fails the ranks a program did not fork with 127, naming the call") {
  const auto result = run("--fork -n 2 -- sh -c 'echo started once'");
  REQUIRE(result.exit_code == 127);
  REQUIRE_THAT(result.output, Catch::Contains("[rank 0] started once\n"));
  REQUIRE_THAT(result.output, Catch::Contains("rank 0 was not forked: sh exited with code 0"));
  REQUIRE_THAT(result.output, Catch::Contains("dcpp::become_launched_rank()"));
  REQUIRE(result.output.find("started once") == result.output.rfind("started once"));
}

TEST_CASE("become_launched_rank() refuses to fork a process that runs a second thread") {
  const auto result = run("--fork -n 2 -- " + worker + " --thread-before-fork");
  REQUIRE(result.exit_code == 127);
  REQUIRE_THAT(result.output, Catch::Contains("[rank 0] dcpp::become_launched_rank: this process "
                                              "already runs"));
  REQUIRE_THAT(result.output, Catch::Contains("call it first in main(), before anything starts"));
  REQUIRE_THAT(result.output, Catch::Contains("rank 0 was not forked"));
  REQUIRE_THAT(result.output, !Catch::Contains(": done"));
}

TEST_CASE("become_launched_rank() exits 2 naming a malformed DCPP_LAUNCH_FORK") {
  const CommandResult result =
      dcpp::test::run_command("DCPP_LAUNCH_FORK='2 0 x' " + worker + " --timeout-ms 1000 2>&1");
  REQUIRE(result.exit_code == 2);
  REQUIRE_THAT(result.output, Catch::Contains("DCPP_LAUNCH_FORK=\"2 0 x\" is not"));
  REQUIRE_THAT(result.output, Catch::Contains("dcpp-launch --fork"));
}

TEST_CASE("dcpp-launch killed with SIGKILL takes its ranks with it within a second") {
  // Issue 60: ranks left training, detached, after `kill -9` of their launcher; a restart then
  // ran a second copy of the job. Each rank dies of SIGKILL with its launcher (PR_SET_PDEATHSIG).
  const std::string mode = GENERATE(as<std::string>{}, "", "--fork");
  std::vector<std::string> argv{DCPP_LAUNCH};
  if (!mode.empty()) argv.push_back(mode);
  for (const char* arg : {"-n", "2", "--"}) argv.emplace_back(arg);
  argv.push_back(worker);
  argv.emplace_back("--print-pid-and-wait");
  dcpp::test::WatchedProcesses ranks;  // outlives the launcher: kills what survives it
  dcpp::test::BackgroundProcess launcher(argv);
  const std::vector<std::string> pids =
      launcher.read_until(R"(^\[rank [01]\] rank [01]: pid ([0-9]+)$)", 2,
                          std::chrono::seconds(static_cast<int>(kLaunchBoundSeconds)));
  INFO(launcher.output());
  REQUIRE(pids.size() == 2);
  for (const std::string& pid : pids) REQUIRE(ranks.watch(static_cast<pid_t>(std::stol(pid))));

  const int status = launcher.kill_and_reap();
  REQUIRE(WIFSIGNALED(status));
  REQUIRE(WTERMSIG(status) == SIGKILL);
  const std::vector<pid_t> survivors = ranks.running_after(std::chrono::seconds(1));
  INFO("ranks still running a second after their launcher was killed: " << survivors.size());
  CHECK(survivors.empty());
}
