#include "orphaned_ranks.h"

#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>
#include <stdexcept>

namespace memory_kills {

namespace {

using Clock = std::chrono::steady_clock;

int pidfd_open(pid_t pid) { return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)); }

long long ms_since(Clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
}

// Reaps `pid` when it is this process's child and has exited: its wait status; nullopt otherwise.
std::optional<int> reap(pid_t pid) {
  int status = 0;
  if (::waitpid(pid, &status, WNOHANG) != pid) return std::nullopt;
  return status;
}

// Whether `pid` has begun to exit (PF_EXITING in /proc/<pid>/stat's flags, or a zombie): its
// exit status is settled, whatever happens to its parent from now on.
bool exiting(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  std::getline(in, stat);
  const std::size_t comm_end = stat.rfind(')');
  if (comm_end == std::string::npos) return false;  // gone: its watch says so
  std::istringstream fields(stat.substr(comm_end + 1));
  std::string state;
  unsigned long skipped = 0, flags = 0;
  fields >> state;
  for (int i = 0; i < 5; ++i) fields >> skipped;  // ppid, pgrp, session, tty_nr, tpgid
  fields >> flags;
  constexpr unsigned long kPfExiting = 0x4;  // include/linux/sched.h
  return state == "Z" || state == "X" || (fields && (flags & kPfExiting) != 0);
}

std::string describe(int status) {
  if (WIFSIGNALED(status)) {
    const char* name = sigabbrev_np(WTERMSIG(status));
    return name ? std::string("SIG") + name : "signal " + std::to_string(WTERMSIG(status));
  }
  return "exit " + std::to_string(WEXITSTATUS(status));
}

bool death_signal(int status) {
  return WIFSIGNALED(status) && (WTERMSIG(status) == SIGKILL || WTERMSIG(status) == SIGTERM);
}

}  // namespace

void become_subreaper() {
  if (::prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) {
    throw std::runtime_error(std::string("prctl(PR_SET_CHILD_SUBREAPER): ") + std::strerror(errno));
  }
}

OrphanWatch::OrphanWatch(const std::vector<std::pair<int, pid_t>>& ranks) {
  for (const auto& [rank, pid] : ranks) {
    const int pidfd = pidfd_open(pid);
    ranks_.push_back({rank, pid, pidfd, exiting(pid)});
  }
}

OrphanWatch::~OrphanWatch() {
  for (const Watched& w : ranks_) {
    if (w.pidfd >= 0) ::close(w.pidfd);
  }
}

std::vector<RankEnd> OrphanWatch::wait(std::chrono::milliseconds deadline) {
  const auto start = Clock::now();
  std::vector<RankEnd> ends;
  std::vector<bool> done(ranks_.size(), false);
  for (size_t i = 0; i < ranks_.size(); ++i) {
    ends.push_back({ranks_[i].rank, ranks_[i].pid, false, ""});
    if (ranks_[i].pidfd < 0) {  // gone before the kill (or no pidfd): nothing to watch
      ends[i].how = "gone before the kill";
      done[i] = true;
    }
  }
  for (;;) {
    std::vector<pollfd> fds;
    std::vector<size_t> which;
    for (size_t i = 0; i < ranks_.size(); ++i) {
      if (done[i]) continue;
      fds.push_back({ranks_[i].pidfd, POLLIN, 0});
      which.push_back(i);
    }
    if (fds.empty()) break;
    const long long left = deadline.count() - ms_since(start);
    if (left <= 0) break;
    if (::poll(fds.data(), fds.size(), static_cast<int>(left)) < 0 && errno != EINTR) break;
    for (size_t k = 0; k < fds.size(); ++k) {
      if (fds[k].revents == 0) continue;
      const size_t i = which[k];
      done[i] = true;
      // An orphan is this process's child once its launcher is gone; reaped here, else by init.
      const std::optional<int> status = reap(ranks_[i].pid);
      ends[i].outlived_launcher = status && !death_signal(*status) && !ranks_[i].exiting;
      ends[i].how = (status ? describe(*status) : "reaped elsewhere") + " after " +
                    std::to_string(ms_since(start)) + " ms" +
                    (ranks_[i].exiting ? " (already exiting at the kill)" : "");
    }
  }
  for (size_t i = 0; i < ranks_.size(); ++i) {
    if (done[i]) continue;
    ends[i].outlived_launcher = true;
    ends[i].how = "alive after " + std::to_string(ms_since(start)) + " ms, then killed";
    ::kill(-ranks_[i].pid, SIGKILL);  // its process group (dcpp-launch gives each rank its own)
    ::kill(ranks_[i].pid, SIGKILL);   // still alive, so the pid is still that rank's
    pollfd p{ranks_[i].pidfd, POLLIN, 0};
    ::poll(&p, 1, 10000);
    reap(ranks_[i].pid);
  }
  return ends;
}

void reap_orphans() {
  int status;
  while (::waitpid(-1, &status, WNOHANG) > 0) {
  }
}

}  // namespace memory_kills
