#include "launched_job.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace crash {
namespace fs = std::filesystem;

namespace {

using Clock = std::chrono::steady_clock;

// The parent process id in /proc/<pid>/stat (the field after the parenthesised command name).
pid_t parent_of(const fs::path& proc_dir) {
  std::ifstream in(proc_dir / "stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) return -1;
  std::istringstream rest(stat.substr(close + 1));
  std::string state;
  pid_t parent = -1;
  rest >> state >> parent;
  return parent;
}

// RANK from /proc/<pid>/environ; -1 when absent or unreadable.
int rank_of(const fs::path& proc_dir) {
  std::ifstream in(proc_dir / "environ", std::ios::binary);
  std::string variable;
  while (std::getline(in, variable, '\0')) {
    if (variable.rfind("RANK=", 0) == 0) {
      try {
        return std::stoi(variable.substr(5));
      } catch (const std::exception&) {
        return -1;
      }
    }
  }
  return -1;
}

int status_code(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

}  // namespace

LaunchedJob::LaunchedJob(const std::string& launcher, int ranks,
                         const std::vector<std::string>& command, const fs::path& log) {
  log_fd_ = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log_fd_ < 0) {
    throw std::runtime_error("cannot open the log '" + log.string() + "': " + std::strerror(errno));
  }
  std::vector<std::string> args{launcher, "-n", std::to_string(ranks), "--timeout", "2", "--"};
  args.insert(args.end(), command.begin(), command.end());
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) {
    throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  }
  pid_ = ::fork();
  if (pid_ < 0) {
    throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  }
  if (pid_ == 0) {
    ::dup2(pipe_fds[1], 1);
    ::dup2(pipe_fds[1], 2);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  ::close(pipe_fds[1]);
  out_ = pipe_fds[0];
  ::fcntl(out_, F_SETFL, ::fcntl(out_, F_GETFL) | O_NONBLOCK);
}

LaunchedJob::~LaunchedJob() {
  if (!exited()) {
    kill_all_ranks();
    ::kill(pid_, SIGKILL);
    int status;
    ::waitpid(pid_, &status, 0);
  }
  if (out_ >= 0) ::close(out_);
  if (log_fd_ >= 0) ::close(log_fd_);
}

void LaunchedJob::log(const std::string& line) {
  const std::string text = line + "\n";
  [[maybe_unused]] const ssize_t n = ::write(log_fd_, text.data(), text.size());
}

std::vector<std::string> LaunchedJob::read_output() {
  std::vector<std::string> lines;
  if (out_ < 0) return lines;
  char buffer[1 << 16];
  for (;;) {
    const ssize_t n = ::read(out_, buffer, sizeof(buffer));
    if (n > 0) {
      pending_.append(buffer, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) {  // end of file: the launcher and every rank closed the pipe
      ::close(out_);
      out_ = -1;
      if (!pending_.empty()) pending_ += '\n';
    }
    break;  // EAGAIN: nothing more now
  }
  size_t start = 0;
  for (size_t end; (end = pending_.find('\n', start)) != std::string::npos; start = end + 1) {
    lines.push_back(pending_.substr(start, end - start));
    log(lines.back());
  }
  pending_.erase(0, start);
  return lines;
}

std::vector<std::pair<int, pid_t>> LaunchedJob::rank_pids() const {
  std::vector<std::pair<int, pid_t>> ranks;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/proc", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    if (parent_of(entry.path()) != pid_) continue;
    ranks.emplace_back(rank_of(entry.path()), static_cast<pid_t>(std::stol(name)));
  }
  return ranks;
}

int LaunchedJob::remember_ranks() {
  ranks_ = rank_pids();
  return static_cast<int>(ranks_.size());
}

bool LaunchedJob::kill_rank(pid_t pid) const {
  // Only a child of our launcher (zombie or alive): a reaped rank's pid may belong to another.
  if (parent_of(fs::path("/proc") / std::to_string(pid)) != pid_) return false;
  ::kill(-pid, SIGKILL);  // its process group (dcpp-launch gives each rank its own)
  ::kill(pid, SIGKILL);
  return true;
}

int LaunchedJob::kill_all_ranks() {
  int killed = 0;
  for (const auto& [rank, pid] : ranks_.empty() ? rank_pids() : ranks_) {
    killed += kill_rank(pid) ? 1 : 0;
  }
  return killed;
}

bool LaunchedJob::kill_one_rank(int rank) {
  for (const auto& [r, pid] : ranks_.empty() ? rank_pids() : ranks_) {
    if (r == rank) return kill_rank(pid);
  }
  return false;
}

bool LaunchedJob::exited() {
  if (reaped_) return true;
  int status;
  const pid_t done = ::waitpid(pid_, &status, WNOHANG);
  if (done == pid_) {
    reaped_ = true;
    exit_code_ = status_code(status);
  }
  return reaped_;
}

int LaunchedJob::wait(std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (!output_ended()) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) break;
    pollfd p{out_, POLLIN, 0};
    ::poll(&p, 1, static_cast<int>(left));
    read_output();
  }
  if (!output_ended()) {  // timed out: the job hangs
    kill_all_ranks();
    ::kill(pid_, SIGKILL);
    int status;
    ::waitpid(pid_, &status, 0);
    reaped_ = true;
    exit_code_ = -1;
    return -1;
  }
  if (!reaped_) {
    int status;
    ::waitpid(pid_, &status, 0);
    reaped_ = true;
    exit_code_ = status_code(status);
  }
  return exit_code_;
}

}  // namespace crash
