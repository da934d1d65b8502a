#pragma once
// A program a test starts and leaves running (a dcpp-launch job, say) while it does other things,
// with its stdout and stderr on a pipe the test reads line by line; and the processes a test
// watches die (the ranks of a job, by the pids they print), through pidfds. Header-only: the test
// programs of several folders use it.

#include "dcpp_test.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <regex>
#include <stdexcept>
#include <string>
#include <vector>

extern char** environ;

namespace dcpp::test {

/// A started program: killed (SIGKILL) and reaped when this object ends, unless it was reaped
/// before.
class BackgroundProcess {
 public:
  /// Starts `argv` (argv[0] a path) with its stdout and stderr on one pipe. Throws
  /// std::runtime_error when it cannot be started.
  explicit BackgroundProcess(const std::vector<std::string>& argv) {
    int ends[2];
    if (::pipe2(ends, O_CLOEXEC) != 0) throw std::runtime_error("pipe2 failed");
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&actions, ends[1], 1);
    posix_spawn_file_actions_adddup2(&actions, ends[1], 2);
    std::vector<std::string> args = argv;
    std::vector<char*> pointers;
    for (std::string& arg : args) pointers.push_back(arg.data());
    pointers.push_back(nullptr);
    const int error =
        ::posix_spawn(&pid_, pointers[0], &actions, nullptr, pointers.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    ::close(ends[1]);
    if (error != 0) {
      ::close(ends[0]);
      throw std::runtime_error("cannot start " + argv[0]);
    }
    output_fd_ = ends[0];
  }
  ~BackgroundProcess() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      reap();
    }
    if (output_fd_ >= 0) ::close(output_fd_);
  }
  BackgroundProcess(const BackgroundProcess&) = delete;
  BackgroundProcess& operator=(const BackgroundProcess&) = delete;

  pid_t pid() const { return pid_; }
  /// What it printed so far (what the reads below took from the pipe).
  const std::string& output() const { return output_; }

  /// Reads its output until `count` lines match `pattern` (std::regex_search), or until its output
  /// ends or `timeout` passes; returns the first submatch of each matching line (the whole match
  /// when the pattern has no group), fewer than `count` when it gave up.
  std::vector<std::string> read_until(const std::string& pattern, std::size_t count,
                                      std::chrono::seconds timeout) {
    const std::regex re(pattern);
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    std::vector<std::string> found;
    std::size_t line_start = 0;
    for (;;) {
      for (std::size_t end; (end = output_.find('\n', line_start)) != std::string::npos;
           line_start = end + 1) {
        const std::string line = output_.substr(line_start, end - line_start);
        std::smatch match;
        if (std::regex_search(line, match, re)) {
          found.push_back(match.size() > 1 ? match[1].str() : match[0].str());
          if (found.size() == count) return found;
        }
      }
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                            deadline - std::chrono::steady_clock::now())
                            .count();
      if (output_fd_ < 0 || left <= 0) return found;
      pollfd readable{output_fd_, POLLIN, 0};
      if (::poll(&readable, 1, static_cast<int>(left)) <= 0) continue;
      char buffer[4096];
      const ssize_t n = ::read(output_fd_, buffer, sizeof buffer);
      if (n > 0) {
        output_.append(buffer, static_cast<std::size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        ::close(output_fd_);
        output_fd_ = -1;
      }
    }
  }

  /// Sends SIGKILL and reaps it; returns its wait status.
  int kill_and_reap() {
    ::kill(pid_, SIGKILL);
    return reap();
  }

 private:
  int reap() {
    int status = 0;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    pid_ = -1;
    return status;
  }

  pid_t pid_ = -1;
  int output_fd_ = -1;
  std::string output_;
};

/// Processes a test watches by pid (not its children: the ranks of a job it started), each
/// through a pidfd opened while it runs, so that a pid used again meanwhile is not mistaken for
/// it. Those still running when this object ends get SIGKILL (their process group too: what they
/// started); those that end as this process's children (it is a child subreaper, as a process that
/// ran launch() with fork is) are reaped.
class WatchedProcesses {
 public:
  WatchedProcesses() = default;
  WatchedProcesses(const WatchedProcesses&) = delete;
  WatchedProcesses& operator=(const WatchedProcesses&) = delete;
  ~WatchedProcesses() {
    for (const Watched& each : watched_) {
      if (each.pidfd < 0) continue;
      if (!has_exited(each.pidfd, 0)) {
        ::kill(-each.pid, SIGKILL);
        ::syscall(SYS_pidfd_send_signal, each.pidfd, SIGKILL, nullptr, 0);
        has_exited(each.pidfd, -1);
      }
      ::waitpid(each.pid, nullptr, WNOHANG);  // ECHILD when not this process's child
      ::close(each.pidfd);
    }
  }

  /// Watches `pid`; false when it has already ended (or was never there).
  bool watch(pid_t pid) {
    const int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
    if (pidfd < 0) return false;
    watched_.push_back({pid, pidfd});
    return true;
  }

  /// Sends SIGKILL to each watched process still running and waits for them all to end.
  void kill_all() const {
    for (const Watched& each : watched_) {
      ::syscall(SYS_pidfd_send_signal, each.pidfd, SIGKILL, nullptr, 0);
      has_exited(each.pidfd, -1);
    }
  }

  /// The pids of the watched processes still running once `timeout` has passed (waiting no longer
  /// than that for all of them to end).
  std::vector<pid_t> running_after(std::chrono::milliseconds timeout) const {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    std::vector<pid_t> running;
    for (const Watched& each : watched_) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                            deadline - std::chrono::steady_clock::now())
                            .count();
      if (!has_exited(each.pidfd, static_cast<int>(std::max<long long>(0, left)))) {
        running.push_back(each.pid);
      }
    }
    return running;
  }

 private:
  struct Watched {
    pid_t pid;
    int pidfd;
  };
  // A pidfd is readable once its process has exited (a zombie included).
  static bool has_exited(int pidfd, int timeout_ms) {
    pollfd exited{pidfd, POLLIN, 0};
    int ready;
    do {
      ready = ::poll(&exited, 1, timeout_ms);
    } while (ready < 0 && errno == EINTR);
    return ready > 0;
  }
  std::vector<Watched> watched_;
};

}  // namespace dcpp::test
