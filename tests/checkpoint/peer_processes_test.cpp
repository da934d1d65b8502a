// Naming the rank that died: a process identity tells whether that process still runs.

#include "dcpp_test.h"

#include "peer_processes.h"

#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <fstream>
#include <sstream>

namespace {

using dcpp::detail::ProcessIdentity;
using dcpp::detail::ProcessState;

// A child blocked reading a pipe until the parent closes it; its identity as it would report it.
struct Child {
  pid_t pid = -1;
  int release_fd = -1;

  Child() {
    int fds[2];
    REQUIRE(pipe(fds) == 0);
    pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      close(fds[1]);
      char byte;
      const ssize_t ignored = read(fds[0], &byte, 1);  // returns when the parent closes its end
      (void)ignored;
      _exit(0);
    }
    close(fds[0]);
    release_fd = fds[1];
  }
  ~Child() {
    if (release_fd >= 0) close(release_fd);
    if (pid > 0) waitpid(pid, nullptr, 0);
  }
  ProcessIdentity identity() const {
    // The child's identity is the parent's but for the pid and start time, read from /proc.
    ProcessIdentity self = dcpp::detail::this_process();
    ProcessIdentity child = self;
    child.pid = pid;
    child.start_time = start_time_of(pid);
    return child;
  }
  static uint64_t start_time_of(pid_t pid) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
    std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::istringstream fields(stat.substr(stat.rfind(')') + 2));
    std::string field;
    for (int i = 3; i <= 22; ++i) fields >> field;
    return std::stoull(field);
  }
  // The child exits; with `reap`, the parent also collects it (else it stays a zombie).
  void end(bool reap) {
    close(release_fd);
    release_fd = -1;
    if (reap) {
      waitpid(pid, nullptr, 0);
      pid = -1;
    } else {
      siginfo_t info{};
      waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOWAIT);  // exited, not reaped
    }
  }
};

}  // namespace

TEST_CASE("a process identity survives its encoding") {
  const ProcessIdentity self = dcpp::detail::this_process();
  CHECK(self.pid == getpid());
  CHECK(!self.machine.empty());
  const ProcessIdentity back =
      dcpp::detail::decode_process_identity(dcpp::detail::encode_process_identity(self), 0);
  CHECK(back.host == self.host);
  CHECK(back.machine == self.machine);
  CHECK(back.pid == self.pid);
  CHECK(back.start_time == self.start_time);
  CHECK_THROWS_WITH(dcpp::detail::decode_process_identity("host\nmachine\nnot a pid\n1", 3),
                    Catch::Contains("process identity rank 3 sent is malformed") &&
                        Catch::Contains("same dcpp build"));
}

TEST_CASE("process_state tells running, exited, zombie, reused and other-machine processes apart") {
  CHECK(dcpp::detail::process_state(dcpp::detail::this_process()) == ProcessState::kRunning);

  Child running;
  const ProcessIdentity child = running.identity();
  CHECK(dcpp::detail::process_state(child) == ProcessState::kRunning);

  ProcessIdentity reused = child;
  reused.start_time += 1;  // the same pid, another process
  CHECK(dcpp::detail::process_state(reused) == ProcessState::kExited);

  ProcessIdentity elsewhere = child;
  elsewhere.machine = "another boot id/pid:[1]";
  CHECK(dcpp::detail::process_state(elsewhere) == ProcessState::kOnAnotherMachine);

  running.end(/*reap=*/false);
  CHECK(dcpp::detail::process_state(child) == ProcessState::kExited);  // a zombie
  running.end(/*reap=*/true);
  CHECK(dcpp::detail::process_state(child) == ProcessState::kExited);  // gone
}

TEST_CASE("describe_peer_processes names the exited rank and the ranks it could not check") {
  const ProcessIdentity self = dcpp::detail::this_process();
  Child alive;
  Child dead;
  const ProcessIdentity dead_identity = dead.identity();
  dead.end(/*reap=*/true);
  ProcessIdentity remote = self;
  remote.machine = "another boot id/pid:[1]";
  remote.host = "node9";

  CHECK(dcpp::detail::describe_peer_processes({self, alive.identity(), dead_identity}, 0) ==
        "rank 2 (pid " + std::to_string(dead_identity.pid) + " on host " + self.host +
            ") has exited");
  CHECK(dcpp::detail::describe_peer_processes({self, alive.identity()}, 0) ==
        "every other rank on this machine is still running (hung, or the network failed?)");
  CHECK(dcpp::detail::describe_peer_processes({remote, self, alive.identity()}, 1) ==
        "every other rank on this machine is still running (hung, or the network failed?); rank 0 "
        "on other machines (host node9) could not be checked");
  CHECK(dcpp::detail::describe_peer_processes({self, remote}, 0) ==
        "no other rank runs on this machine: rank 1 (on host node9) could not be checked");
  ProcessIdentity other_remote = remote;
  other_remote.host = "node10";
  CHECK(dcpp::detail::describe_peer_processes({self, remote, other_remote, remote}, 0) ==
        "no other rank runs on this machine: ranks 1, 2, 3 (on hosts node9, node10) could not be "
        "checked");
}
