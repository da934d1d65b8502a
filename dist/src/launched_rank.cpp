// become_launched_rank(): the program side of `dcpp-launch --fork` (tools/launch/launcher.cpp).

#include <dcpp/dist/launched_rank.h>

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>

namespace dcpp {
namespace {

struct ForkRequest {
  int local_ranks = 0;
  int first_rank = 0;
  int first_fd = 0;
  int report_fd = 0;
  long launcher = 0;  // the launcher's pid
};

[[noreturn]] void refuse(const std::string& why) {
  const std::string line = std::string("dcpp::become_launched_rank: ") + why + "\n";
  [[maybe_unused]] const ssize_t n = ::write(2, line.data(), line.size());
  ::_exit(2);
}

ForkRequest parse_request(const char* text) {
  ForkRequest request;
  char end = 0;
  if (std::sscanf(text, "%d %d %d %d %ld%c", &request.local_ranks, &request.first_rank,
                  &request.first_fd, &request.report_fd, &request.launcher, &end) != 5 ||
      request.local_ranks < 1 || request.first_rank < 0 || request.first_fd < 3 ||
      request.report_fd < 3 || request.launcher < 1) {
    refuse(std::string(kForkedRanksVariable) + "=\"" + text +
           "\" is not \"<local ranks> <first rank> <first descriptor> <report descriptor> "
           "<launcher pid>\": start the program with dcpp-launch --fork");
  }
  return request;
}

// The threads of this process, from /proc/self/task; -1 when it cannot be read.
int thread_count() {
  DIR* tasks = ::opendir("/proc/self/task");
  if (tasks == nullptr) return -1;
  int count = 0;
  while (const dirent* entry = ::readdir(tasks)) {
    if (entry->d_name[0] != '.') ++count;
  }
  ::closedir(tasks);
  return count;
}

// In the forked child: the environment and descriptors of local rank `local`.
void become_rank(const ForkRequest& request, int local) {
  ::setpgid(0, 0);  // its own process group, as dcpp-launch gives a rank it starts itself
  if (::dup2(request.first_fd + 2 * local, 1) < 0 ||
      ::dup2(request.first_fd + 2 * local + 1, 2) < 0) {
    refuse(std::string("cannot take the launcher's output descriptors: ") + std::strerror(errno));
  }
  for (int fd = request.first_fd; fd < request.first_fd + 2 * request.local_ranks; ++fd) {
    ::close(fd);
  }
  ::close(request.report_fd);
  ::unsetenv(kForkedRanksVariable);
  ::setenv("RANK", std::to_string(request.first_rank + local).c_str(), 1);
  ::setenv("LOCAL_RANK", std::to_string(local).c_str(), 1);
}

// In the forked child, once its descriptors are set: waits for the started process (`program`,
// its pidfd `program_fd`) to exit, which makes the launcher, a child subreaper, this rank's
// parent; then asks for SIGKILL when that parent dies (PR_SET_PDEATHSIG), and exits at once
// should it be gone already. Not before: the signal would come when the started process exits.
void die_with_launcher(const ForkRequest& request, int program_fd, pid_t program) {
  pollfd exited{program_fd, POLLIN, 0};
  while (::poll(&exited, 1, -1) < 0 && errno == EINTR) {
  }
  ::close(program_fd);
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  pid_t parent;
  while ((parent = ::getppid()) == program) ::sched_yield();       // the reparenting, seen late
  if (parent != static_cast<pid_t>(request.launcher)) ::_exit(1);  // the launcher is gone
}

// Registered in each forked rank (on_exit: after every static object constructed so far, so it
// runs before their destructors): ends the process with exit()'s status once stdio is flushed.
// The destructors of libtorch's registrations rewrite every page they registered into, and after
// the fork each such page is one the ranks still share: a copy per page per rank, most of a
// second of CPU, for a process that is ending anyway.
void end_rank_now(int status, void*) {
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  ::_exit(status);
}

void report(int fd, int local, pid_t pid) {
  const std::string line = std::to_string(local) + " " + std::to_string(pid) + "\n";
  const char* data = line.data();
  std::size_t left = line.size();
  while (left > 0) {
    const ssize_t written = ::write(fd, data, left);
    if (written < 0 && errno == EINTR) continue;
    if (written <= 0) ::_exit(1);  // the launcher is gone: fork no more ranks
    data += written;
    left -= static_cast<std::size_t>(written);
  }
}

}  // namespace

void become_launched_rank() {
  const char* text = std::getenv(kForkedRanksVariable);
  if (text == nullptr) return;
  const ForkRequest request = parse_request(text);
  const int threads = thread_count();
  if (threads > 1) {
    refuse("this process already runs " + std::to_string(threads) +
           " threads; call it first in main(), before anything starts one");
  }
  // Readable once this process has exited: each rank waits for it (die_with_launcher).
  const pid_t program = ::getpid();
  const int program_fd = static_cast<int>(::syscall(SYS_pidfd_open, program, 0));
  if (program_fd < 0) {
    refuse(std::string("cannot open a pidfd of this process (Linux 5.3 or later is needed): ") +
           std::strerror(errno));
  }
  std::fflush(nullptr);  // nothing buffered may be written twice
  for (int local = 0; local < request.local_ranks; ++local) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      become_rank(request, local);
      die_with_launcher(request, program_fd, program);
      ::on_exit(end_rank_now, nullptr);
      return;
    }
    if (pid < 0) {
      refuse("cannot fork local rank " + std::to_string(local) + ": " + std::strerror(errno));
    }
    report(request.report_fd, local, pid);
  }
  ::_exit(0);
}

}  // namespace dcpp
