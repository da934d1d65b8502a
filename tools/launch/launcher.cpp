// `dcpp-launch`'s logic.
//
// Each rank is forked and exec'd into its own process group, set to die with the launcher
// (PR_SET_PDEATHSIG, see spawn_command), with its stdout on a
// pseudo-terminal (or a pipe) and its stderr on a pipe, and watched through a pidfd. One poll()
// loop forwards output, reaps ranks as their pidfds become readable and watches the interrupt
// descriptor; its only timeout is the grace deadline while ranks are being stopped. Stopping
// signals whole process groups, so helpers a rank started stop with it.

#include "launch/launcher.h"

#include <dcpp/dist/launched_rank.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

extern char** environ;

namespace dcpp::tools {
namespace {

using Clock = std::chrono::steady_clock;

void write_all(int fd, const char* data, std::size_t size) {
  while (size > 0) {
    const ssize_t written = ::write(fd, data, size);
    if (written < 0) {
      if (errno == EINTR) continue;
      return;  // A closed stdout must not stop the launcher from stopping its ranks.
    }
    data += written;
    size -= static_cast<std::size_t>(written);
  }
}

void message(int fd, const std::string& text) {
  const std::string line = "dcpp-launch: " + text + "\n";
  write_all(fd, line.data(), line.size());
}

std::system_error os_error(const std::string& what) {
  return std::system_error(errno, std::generic_category(), "dcpp-launch: " + what);
}

int pidfd_open(pid_t pid) { return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)); }

// The exit code a rank's wait status stands for: its exit status, or 128 + the signal.
int exit_code_of(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

std::string describe(int status) {
  if (WIFSIGNALED(status)) {
    return std::string("was killed by signal ") + std::to_string(WTERMSIG(status)) + " (" +
           ::strsignal(WTERMSIG(status)) + ")";
  }
  return "exited with code " + std::to_string(exit_code_of(status));
}

struct Rank {
  pid_t pid = -1;
  int pidfd = -1;
  // Read ends of the rank's stdout (a pseudo-terminal's master: EIO once the rank's side is
  // closed, which drain() takes as the end) and stderr, -1 once at the end.
  int out = -1;
  int err = -1;
  std::optional<LinePrefixer> out_lines;
  std::optional<LinePrefixer> err_lines;
  bool exited = false;
};

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

// Reads what is there; at EOF (or an error) ends the stream.
void drain(int& fd, std::optional<LinePrefixer>& lines) {
  char buffer[65536];
  ssize_t n;
  do {
    n = ::read(fd, buffer, sizeof buffer);
  } while (n < 0 && errno == EINTR);
  if (n > 0) {
    lines->feed(buffer, static_cast<std::size_t>(n));
  } else {
    lines->finish();
    close_fd(fd);
  }
}

// A pseudo-terminal in raw mode (no "\r" added, no echo): {master, slave}, both close-on-exec.
// False when none can be opened (no /dev/pts in a container or chroot).
bool open_pseudo_terminal(int (&ends)[2]) {
  const int master = ::posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (master < 0) return false;
  char name[128];
  if (::grantpt(master) != 0 || ::unlockpt(master) != 0 ||
      ::ptsname_r(master, name, sizeof name) != 0) {
    ::close(master);
    return false;
  }
  const int slave = ::open(name, O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (slave < 0) {
    ::close(master);
    return false;
  }
  termios mode{};
  if (::tcgetattr(slave, &mode) == 0) {
    ::cfmakeraw(&mode);
    ::tcsetattr(slave, TCSANOW, &mode);
  }
  ends[0] = master;
  ends[1] = slave;
  return true;
}

// The RANK of this host's rank `local`.
int global_rank(const LaunchOptions& options, int local) {
  return options.node_rank * options.nproc + local;
}

// The launcher's environment without the torchrun variables, then the host's: WORLD_SIZE,
// LOCAL_WORLD_SIZE, GROUP_RANK, MASTER_ADDR and MASTER_PORT (each rank adds RANK and LOCAL_RANK).
std::vector<std::string> host_environment(const LaunchOptions& options, int port) {
  std::vector<std::string> environment;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry(*e);
    const std::string name = entry.substr(0, entry.find('='));
    if (name == "RANK" || name == "LOCAL_RANK" || name == "WORLD_SIZE" || name == "MASTER_ADDR" ||
        name == "MASTER_PORT" || name == "LOCAL_WORLD_SIZE" || name == "GROUP_RANK" ||
        name == kForkedRanksVariable) {
      continue;
    }
    environment.push_back(entry);
  }
  environment.push_back("WORLD_SIZE=" + std::to_string(options.nnodes * options.nproc));
  environment.push_back("LOCAL_WORLD_SIZE=" + std::to_string(options.nproc));
  environment.push_back("GROUP_RANK=" + std::to_string(options.node_rank));
  environment.push_back("MASTER_ADDR=" + options.master_addr);
  environment.push_back("MASTER_PORT=" + std::to_string(port));
  return environment;
}

// In the child between fork() and exec (async-signal-safe calls only): `error` to the pipe
// `report`, then _exit(127).
[[noreturn]] void fail_in_child(int report, int error) {
  [[maybe_unused]] const ssize_t n = ::write(report, &error, sizeof error);
  ::_exit(127);
}

// Starts the command in a process group of its own, stdin /dev/null, every signal at its default
// and none blocked; `descriptors` are dup2'd (from, to) in order, so no `to` may be a later `from`.
// Returns its pid, or -1 with errno set when the program cannot be run.
//
// The child dies with the launcher: it asks for SIGKILL when its parent dies
// (PR_SET_PDEATHSIG) before it execs, then checks that its parent is still the launcher (one
// killed before the prctl would not signal it). "Parent" is the thread that forked it, here the
// one that called launch(), which returns only once every rank has exited: the ranks never outlive
// it while the launcher lives. Forked, not posix_spawn'ed, for the prctl; every signal is blocked
// across the fork, so that no handler of the launcher's runs in the child before it is reset.
pid_t spawn_command(const LaunchOptions& options, std::vector<std::string> environment,
                    const std::vector<std::pair<int, int>>& descriptors) {
  std::vector<char*> envp;
  for (auto& entry : environment) envp.push_back(entry.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = options.command;
  std::vector<char*> argv;
  for (auto& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  // Why exec failed, from the child: a close-on-exec pipe that stays empty when it succeeds. Its
  // write end above every `to`, so no dup2 overwrites it.
  int report[2];
  if (::pipe2(report, O_CLOEXEC) != 0) return -1;
  int highest_target = 2;
  for (const auto& [from, to] : descriptors) highest_target = std::max(highest_target, to);
  if (report[1] <= highest_target) {
    const int moved = ::fcntl(report[1], F_DUPFD_CLOEXEC, highest_target + 1);
    const int error = errno;
    ::close(report[1]);
    if (moved < 0) {
      ::close(report[0]);
      errno = error;
      return -1;
    }
    report[1] = moved;
  }
  const pid_t launcher = ::getpid();
  sigset_t all;
  sigset_t saved;
  sigfillset(&all);
  ::pthread_sigmask(SIG_SETMASK, &all, &saved);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != launcher) ::_exit(127);  // the launcher died before the prctl
    ::setpgid(0, 0);
    // The launcher's handlers, and the signals it handles or ignores itself, at their defaults
    // (exec would keep an ignored SIGPIPE ignored); others the launcher inherited ignored stay so.
    for (int signal = 1; signal < NSIG; ++signal) {
      struct sigaction action {};
      if (::sigaction(signal, nullptr, &action) != 0) continue;
      const bool launchers = signal == SIGINT || signal == SIGTERM || signal == SIGHUP ||
                             signal == SIGPIPE || signal == SIGCHLD;
      if (action.sa_handler == SIG_DFL || (action.sa_handler == SIG_IGN && !launchers)) continue;
      action.sa_handler = SIG_DFL;
      action.sa_flags = 0;
      ::sigaction(signal, &action, nullptr);
    }
    const int null = ::open("/dev/null", O_RDONLY);
    if (null < 0) fail_in_child(report[1], errno);
    if (null != 0) {
      if (::dup2(null, 0) < 0) fail_in_child(report[1], errno);
      ::close(null);
    }
    for (const auto& [from, to] : descriptors) {
      if (from == to) {
        if (::fcntl(from, F_SETFD, 0) < 0) fail_in_child(report[1], errno);  // keep it open
      } else if (::dup2(from, to) < 0) {
        fail_in_child(report[1], errno);
      }
    }
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::execvpe(argv[0], argv.data(), envp.data());
    fail_in_child(report[1], errno);
  }
  const int fork_errno = errno;
  ::pthread_sigmask(SIG_SETMASK, &saved, nullptr);
  ::close(report[1]);
  if (pid < 0) {
    ::close(report[0]);
    errno = fork_errno;
    return -1;
  }
  int exec_errno = 0;
  ssize_t got;
  do {
    got = ::read(report[0], &exec_errno, sizeof exec_errno);
  } while (got < 0 && errno == EINTR);
  ::close(report[0]);
  if (got == static_cast<ssize_t>(sizeof exec_errno)) {
    while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
    }
    errno = exec_errno;
    return -1;
  }
  return pid;
}

// Starts one rank (`rank`: its LOCAL_RANK); returns its pid, or -1 with errno set when the program
// cannot be run.
pid_t spawn_rank(const LaunchOptions& options, int rank, int port, int out_write, int err_write) {
  std::vector<std::string> environment = host_environment(options, port);
  environment.push_back("RANK=" + std::to_string(global_rank(options, rank)));
  environment.push_back("LOCAL_RANK=" + std::to_string(rank));
  return spawn_command(options, std::move(environment), {{out_write, 1}, {err_write, 2}});
}

// What starting a forking program (LaunchOptions::fork) came to.
struct ForkedRanks {
  int spawn_errno = 0;  // the program could not be run
  int status = 0;       // its wait status
  std::string why_not_forked(const LaunchOptions& options) const {
    if (spawn_errno != 0) {
      return "could not run " + options.command[0] + ": " + std::strerror(spawn_errno);
    }
    return "was not forked: " + options.command[0] + " " + describe(status) +
           " before it had forked every rank; a program started with --fork must call "
           "dcpp::become_launched_rank() (<dcpp/dist/launched_rank.h>) first in main()";
  }
};

// LaunchOptions::fork: starts the program once with every rank's output descriptors and a report
// pipe (kForkedRanksVariable), forwards what it prints as rank 0's, and reaps it once it has forked
// the ranks and exited; the launcher, a child subreaper, has then inherited the ranks. Sets the
// reported ranks' pid and pidfd.
ForkedRanks fork_ranks(const LaunchOptions& options, int port, std::vector<Rank>& ranks,
                       const std::vector<int>& out_writes, const std::vector<int>& err_writes) {
  if (::prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) throw os_error("prctl(PR_SET_CHILD_SUBREAPER)");
  int report[2];
  if (::pipe2(report, O_CLOEXEC) != 0) throw os_error("pipe");
  // Non-blocking: once the program has exited its report is all in the pipe, though a rank that
  // has not yet closed its copy of the write end would keep a blocking read waiting.
  ::fcntl(report[0], F_SETFL, O_NONBLOCK);
  const int local_ranks = static_cast<int>(ranks.size());
  int first_fd = report[1];
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    first_fd = std::max({first_fd, out_writes[i], err_writes[i]});
  }
  ++first_fd;  // above every descriptor dup2'd from, so no dup2 overwrites one still to come
  std::vector<std::pair<int, int>> descriptors{{out_writes[0], 1}, {err_writes[0], 2}};
  for (int i = 0; i < local_ranks; ++i) {
    descriptors.emplace_back(out_writes[static_cast<std::size_t>(i)], first_fd + 2 * i);
    descriptors.emplace_back(err_writes[static_cast<std::size_t>(i)], first_fd + 2 * i + 1);
  }
  const int report_fd = first_fd + 2 * local_ranks;
  descriptors.emplace_back(report[1], report_fd);
  std::vector<std::string> environment = host_environment(options, port);
  environment.push_back(std::string(kForkedRanksVariable) + "=" + std::to_string(local_ranks) +
                        " " + std::to_string(global_rank(options, 0)) + " " +
                        std::to_string(first_fd) + " " + std::to_string(report_fd) + " " +
                        std::to_string(::getpid()));
  ForkedRanks outcome;
  const pid_t program = spawn_command(options, std::move(environment), descriptors);
  outcome.spawn_errno = program < 0 ? errno : 0;
  ::close(report[1]);
  if (program < 0) {
    ::close(report[0]);
    return outcome;
  }
  const int program_fd = pidfd_open(program);
  if (program_fd < 0) {
    const auto error = os_error("pidfd_open (Linux 5.3 or later is needed)");
    ::kill(-program, SIGKILL);
    ::waitpid(program, nullptr, 0);
    ::close(report[0]);
    throw error;
  }
  // Until it has exited: its report, and the ranks' output (its own is rank 0's).
  std::string reported;
  int report_read = report[0];
  bool reaped = false;
  std::vector<pollfd> fds;
  while (!reaped) {
    fds.assign({{program_fd, POLLIN, 0}});
    if (report_read >= 0) fds.push_back({report_read, POLLIN, 0});
    for (const Rank& rank : ranks) {
      if (rank.out >= 0) fds.push_back({rank.out, POLLIN, 0});
      if (rank.err >= 0) fds.push_back({rank.err, POLLIN, 0});
    }
    if (::poll(fds.data(), fds.size(), -1) < 0) {
      if (errno == EINTR) continue;
      const auto error = os_error("poll");
      ::kill(-program, SIGKILL);
      ::waitpid(program, nullptr, 0);
      ::close(program_fd);
      close_fd(report_read);
      throw error;
    }
    for (std::size_t k = 1; k < fds.size(); ++k) {
      if (fds[k].revents == 0) continue;
      if (fds[k].fd == report_read) {
        char buffer[4096];
        const ssize_t n = ::read(report_read, buffer, sizeof buffer);
        if (n > 0) {
          reported.append(buffer, static_cast<std::size_t>(n));
        } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
          close_fd(report_read);
        }
        continue;
      }
      for (Rank& rank : ranks) {
        if (fds[k].fd == rank.out) drain(rank.out, rank.out_lines);
        if (fds[k].fd == rank.err) drain(rank.err, rank.err_lines);
      }
    }
    if (fds[0].revents != 0) {
      pid_t done;
      do {
        done = ::waitpid(program, &outcome.status, WNOHANG);
      } while (done < 0 && errno == EINTR);
      reaped = done != 0;
    }
  }
  ::close(program_fd);
  // What it reported before it exited.
  while (report_read >= 0) {
    char buffer[4096];
    const ssize_t n = ::read(report_read, buffer, sizeof buffer);
    if (n > 0) {
      reported.append(buffer, static_cast<std::size_t>(n));
    } else if (n == 0 || errno != EINTR) {
      close_fd(report_read);
    }
  }
  std::size_t at = 0;
  for (std::size_t end; (end = reported.find('\n', at)) != std::string::npos; at = end + 1) {
    int local = -1;
    long pid = -1;
    if (std::sscanf(reported.c_str() + at, "%d %ld", &local, &pid) != 2 || local < 0 ||
        local >= local_ranks || pid <= 0) {
      continue;  // not a line of become_launched_rank()'s
    }
    Rank& rank = ranks[static_cast<std::size_t>(local)];
    rank.pid = static_cast<pid_t>(pid);
    rank.pidfd = pidfd_open(rank.pid);
    if (rank.pidfd < 0) throw os_error("pidfd_open of a forked rank");
  }
  return outcome;
}

// Signals a rank's process group (and the rank itself, should it have left the group).
void signal_rank(const Rank& rank, int signal) {
  if (rank.pid <= 0 || rank.exited) return;  // never kill(-1) or kill(0)
  ::kill(-rank.pid, signal);
  ::kill(rank.pid, signal);
}

}  // namespace

void LinePrefixer::feed(const char* data, std::size_t size) {
  const char* end = data + size;
  while (data < end) {
    const char* newline = static_cast<const char*>(std::memchr(data, '\n', end - data));
    if (newline == nullptr) {
      pending_.append(data, end);
      if (pending_.size() >= kMaxLine) {  // a line without end (progress bars): flush it
        emit(pending_.data(), pending_.size());
        pending_.clear();
      }
      return;
    }
    if (pending_.empty()) {
      emit(data, static_cast<std::size_t>(newline - data));
    } else {
      pending_.append(data, newline);
      emit(pending_.data(), pending_.size());
      pending_.clear();
    }
    data = newline + 1;
  }
}

void LinePrefixer::finish() {
  if (!pending_.empty()) {
    emit(pending_.data(), pending_.size());
    pending_.clear();
  }
}

void LinePrefixer::emit(const char* begin, std::size_t size) {
  std::string line;
  line.reserve(prefix_.size() + size + 1);
  line.append(prefix_).append(begin, size).push_back('\n');
  write_all(fd_, line.data(), line.size());
}

int pick_free_port(const std::string& address) {
  sockaddr_in socket_address{};
  socket_address.sin_family = AF_INET;
  socket_address.sin_port = 0;
  if (::inet_pton(AF_INET, address.c_str(), &socket_address.sin_addr) != 1) {
    throw std::runtime_error("dcpp-launch: \"" + address + "\" is not an IPv4 address");
  }
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw os_error("socket");
  socklen_t length = sizeof socket_address;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&socket_address), sizeof socket_address) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&socket_address), &length) != 0) {
    const auto error = os_error("cannot bind a port on " + address);
    ::close(fd);
    throw error;
  }
  ::close(fd);
  return ntohs(socket_address.sin_port);
}

int launch(const LaunchOptions& options) {
  if (options.nproc < 1) throw std::invalid_argument("dcpp-launch: -n must be at least 1");
  if (options.command.empty()) throw std::invalid_argument("dcpp-launch: no command to run");
  if (options.master_port < 0 || options.master_port > 65535) {
    throw std::invalid_argument("dcpp-launch: the master port must be in [0, 65535]");
  }
  if (options.nnodes < 1 || options.node_rank < 0 || options.node_rank >= options.nnodes) {
    throw std::invalid_argument("dcpp-launch: the node rank must be in [0, nnodes)");
  }
  if (options.nnodes > 1 && options.master_port == 0) {
    throw std::invalid_argument(
        "dcpp-launch: several nodes need --master-port, the same on every node");
  }
  if (options.stop_grace.count() < 0) {
    throw std::invalid_argument("dcpp-launch: the timeout must not be negative");
  }
  const int port =
      options.master_port != 0 ? options.master_port : pick_free_port(options.master_addr);

  std::vector<Rank> ranks(static_cast<std::size_t>(options.nproc));
  std::optional<int> result;  // the first failure's code (or 128 + an interrupting signal)
  bool stopping = false;
  bool killed = false;
  Clock::time_point deadline;

  const auto stop_all = [&] {
    if (stopping) return;
    stopping = true;
    for (const Rank& rank : ranks) signal_rank(rank, SIGTERM);
    deadline = Clock::now() + options.stop_grace;
  };
  const auto fail = [&](int index, int code, const std::string& what) {
    if (result || stopping) return;  // ranks we stop are not failures of their own
    result = code;
    message(options.stderr_fd, "rank " + std::to_string(global_rank(options, index)) + " " + what +
                                   (options.nproc > 1 ? "; stopping the other ranks" : ""));
    stop_all();
  };
  const auto abandon = [&] {  // on an internal error: nothing may outlive the launcher
    for (Rank& rank : ranks) {
      if (rank.pid > 0 && !rank.exited) {
        signal_rank(rank, SIGKILL);
        ::waitpid(rank.pid, nullptr, 0);
      }
      close_fd(rank.pidfd);
      close_fd(rank.out);
      close_fd(rank.err);
    }
  };

  // Every rank's output first: a forking program gets them all at once.
  std::vector<int> out_writes(ranks.size(), -1);
  std::vector<int> err_writes(ranks.size(), -1);
  const auto close_writes = [&] {
    for (int& fd : out_writes) close_fd(fd);
    for (int& fd : err_writes) close_fd(fd);
  };
  for (int index = 0; index < options.nproc; ++index) {
    Rank& rank = ranks[static_cast<std::size_t>(index)];
    const std::string prefix = "[rank " + std::to_string(global_rank(options, index)) + "] ";
    rank.out_lines.emplace(prefix, options.stdout_fd);
    rank.err_lines.emplace(prefix, options.stderr_fd);
    int out_pipe[2];
    int err_pipe[2];
    if (!(options.stdout_terminal && open_pseudo_terminal(out_pipe)) &&
        ::pipe2(out_pipe, O_CLOEXEC) != 0) {
      const auto error = os_error("pipe");
      close_writes();
      abandon();
      throw error;
    }
    if (::pipe2(err_pipe, O_CLOEXEC) != 0) {
      const auto error = os_error("pipe");
      ::close(out_pipe[0]);
      ::close(out_pipe[1]);
      close_writes();
      abandon();
      throw error;
    }
    rank.out = out_pipe[0];
    rank.err = err_pipe[0];
    out_writes[static_cast<std::size_t>(index)] = out_pipe[1];
    err_writes[static_cast<std::size_t>(index)] = err_pipe[1];
  }

  if (options.fork) {
    ForkedRanks forked;
    try {
      forked = fork_ranks(options, port, ranks, out_writes, err_writes);
    } catch (...) {
      close_writes();
      abandon();
      throw;
    }
    close_writes();
    for (std::size_t index = 0; index < ranks.size(); ++index) {
      Rank& rank = ranks[index];
      if (rank.pid > 0) continue;
      rank.exited = true;
      fail(static_cast<int>(index), 127, forked.why_not_forked(options));
    }
  } else {
    for (int index = 0; index < options.nproc; ++index) {
      Rank& rank = ranks[static_cast<std::size_t>(index)];
      rank.pid = spawn_rank(options, index, port, out_writes[static_cast<std::size_t>(index)],
                            err_writes[static_cast<std::size_t>(index)]);
      const int spawn_errno = errno;
      close_fd(out_writes[static_cast<std::size_t>(index)]);
      close_fd(err_writes[static_cast<std::size_t>(index)]);
      if (rank.pid < 0) {
        rank.exited = true;
        close_writes();
        fail(index, 127, "could not run " + options.command[0] + ": " + std::strerror(spawn_errno));
        break;
      }
      rank.pidfd = pidfd_open(rank.pid);
      if (rank.pidfd < 0) {
        const auto error = os_error("pidfd_open (Linux 5.3 or later is needed)");
        close_writes();
        abandon();
        throw error;
      }
    }
  }

  int interrupts = 0;  // the first stops the ranks, a second kills them
  std::vector<pollfd> fds;
  std::vector<std::pair<std::size_t, int>> owners;  // per fds entry: rank, 0 out / 1 err / 2 pid
  for (;;) {
    fds.clear();
    owners.clear();
    bool all_exited = true;
    for (std::size_t i = 0; i < ranks.size(); ++i) {
      const Rank& rank = ranks[i];
      if (rank.out >= 0) fds.push_back({rank.out, POLLIN, 0}), owners.push_back({i, 0});
      if (rank.err >= 0) fds.push_back({rank.err, POLLIN, 0}), owners.push_back({i, 1});
      if (rank.pidfd >= 0) fds.push_back({rank.pidfd, POLLIN, 0}), owners.push_back({i, 2});
      all_exited = all_exited && rank.pidfd < 0;
    }
    if (fds.empty()) break;
    const bool watch_interrupt = options.interrupt_fd >= 0 && interrupts < 2 && !all_exited;
    if (watch_interrupt) {
      fds.push_back({options.interrupt_fd, POLLIN, 0});
      owners.push_back({0, 3});
    }
    int timeout_ms = -1;
    if (all_exited) {
      timeout_ms = 0;  // what is already in the pipes; helpers that outlive their rank are not
                       // waited for
    } else if (stopping && !killed) {
      const auto left =
          std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count();
      timeout_ms = static_cast<int>(std::max<long long>(0, left));
    }
    const int ready = ::poll(fds.data(), fds.size(), timeout_ms);
    if (ready < 0) {
      if (errno == EINTR) continue;
      const auto error = os_error("poll");
      abandon();
      throw error;
    }
    if (ready == 0) {
      if (all_exited) break;
      if (stopping && !killed && Clock::now() >= deadline) {
        killed = true;
        for (const Rank& rank : ranks) signal_rank(rank, SIGKILL);
      }
      continue;
    }
    for (std::size_t k = 0; k < fds.size(); ++k) {
      if (fds[k].revents == 0) continue;
      const auto [i, what] = owners[k];
      Rank& rank = ranks[i];
      if (what == 0) {
        drain(rank.out, rank.out_lines);
      } else if (what == 1) {
        drain(rank.err, rank.err_lines);
      } else if (what == 2) {
        int status = 0;
        pid_t reaped;
        do {
          reaped = ::waitpid(rank.pid, &status, WNOHANG);
        } while (reaped < 0 && errno == EINTR);
        if (reaped == 0) continue;  // not yet (spurious readiness)
        rank.exited = true;
        close_fd(rank.pidfd);
        if (reaped > 0 && (!WIFEXITED(status) || WEXITSTATUS(status) != 0)) {
          fail(static_cast<int>(i), exit_code_of(status), describe(status));
        }
      } else {
        unsigned char signal = 0;
        const ssize_t n = ::read(options.interrupt_fd, &signal, 1);
        if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        ++interrupts;
        if (stopping && !killed) {
          killed = true;
          for (const Rank& other : ranks) signal_rank(other, SIGKILL);
        } else if (!result && !stopping) {
          result = 128 + (n == 1 ? signal : SIGTERM);
          message(options.stderr_fd, std::string("interrupted (") +
                                         (n == 1 ? ::strsignal(signal) : "stop requested") +
                                         "); stopping the ranks");
          stop_all();
        }
      }
    }
  }
  for (Rank& rank : ranks) {  // helpers that outlive their rank may still hold a pipe
    if (rank.out >= 0) rank.out_lines->finish();
    if (rank.err >= 0) rank.err_lines->finish();
    close_fd(rank.out);
    close_fd(rank.err);
  }
  return result.value_or(0);
}

}  // namespace dcpp::tools
