// OrphanWatch (orphaned_ranks.h), on real child processes: a rank killed with its launcher did not
// outlive it; one that exits on its own after the kill did; one whose exit had begun before the
// watch (a job that finished as its launcher was killed: kill trial 760 of seed 60) did not.

#include "dcpp_test.h"

#include "orphaned_ranks.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>

using memory_kills::OrphanWatch;
using memory_kills::RankEnd;
using namespace std::chrono_literals;

namespace {

// A child blocked until `release` (a pipe's write end) is closed, then exiting 0.
pid_t blocked_child(int release[2]) {
  REQUIRE(::pipe(release) == 0);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::close(release[1]);
    char byte;
    while (::read(release[0], &byte, 1) > 0) {
    }
    ::_exit(0);
  }
  ::close(release[0]);
  return pid;
}

}  // namespace

TEST_CASE("a rank killed with its launcher did not outlive it") {
  int release[2];
  const pid_t pid = blocked_child(release);
  OrphanWatch watch({{0, pid}});
  ::kill(pid, SIGKILL);  // what its parent-death signal does
  const std::vector<RankEnd> ends = watch.wait(10s);
  ::close(release[1]);
  REQUIRE(ends.size() == 1);
  CHECK_FALSE(ends[0].outlived_launcher);
  CHECK_THAT(ends[0].how, Catch::Contains("SIGKILL"));
}

TEST_CASE("a rank that exits after its launcher's kill outlived it") {
  int release[2];
  const pid_t pid = blocked_child(release);
  OrphanWatch watch({{1, pid}});
  ::close(release[1]);  // it runs on, and exits 0
  const std::vector<RankEnd> ends = watch.wait(10s);
  REQUIRE(ends.size() == 1);
  CHECK(ends[0].outlived_launcher);
  CHECK_THAT(ends[0].how, Catch::Contains("exit 0"));
}

TEST_CASE("a rank already exiting when its launcher is killed did not outlive it") {
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) ::_exit(0);
  // Exited, not reaped: a zombie, whose exit status was settled before the watch began.
  siginfo_t info{};
  REQUIRE(::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOWAIT) == 0);
  OrphanWatch watch({{0, pid}});
  const std::vector<RankEnd> ends = watch.wait(10s);
  REQUIRE(ends.size() == 1);
  CHECK_FALSE(ends[0].outlived_launcher);
  CHECK_THAT(ends[0].how, Catch::Contains("exit 0"));
  CHECK_THAT(ends[0].how, Catch::Contains("already exiting"));
}
