#pragma once
// A multi-rank job started through dcpp-launch, whose ranks the crash driver can SIGKILL: all at
// once (a node or job lost) or one of them (a rank lost; the launcher then stops the others).

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

namespace crash {

/// Not thread-safe. The destructor kills whatever still runs and reaps the launcher.
class LaunchedJob {
 public:
  /// Starts `launcher -n ranks -- command...`, its stdout and stderr (the ranks' lines, prefixed
  /// "[rank R] ") on a pipe that output_fd() reads; every line is also appended to `log`.
  /// Throws std::runtime_error when the process cannot be started.
  LaunchedJob(const std::string& launcher, int ranks, const std::vector<std::string>& command,
              const std::filesystem::path& log);
  ~LaunchedJob();
  LaunchedJob(const LaunchedJob&) = delete;
  LaunchedJob& operator=(const LaunchedJob&) = delete;

  /// Readable when the job printed something (or ended: then read_output() sees the end).
  int output_fd() const { return out_; }
  /// Reads what is available without blocking; returns the complete lines read (as the launcher
  /// wrote them, "[rank R] " first). Sets output_ended() at end of file.
  std::vector<std::string> read_output();
  bool output_ended() const { return out_ < 0; }

  /// The ranks' process ids by rank (the launcher's children, found in /proc, each one's RANK
  /// read from its environment); a rank not (or no longer) found is missing.
  std::vector<std::pair<int, pid_t>> rank_pids() const;
  /// Finds the ranks (rank_pids()) and keeps them for the kills below, which then cost no /proc
  /// scan. Returns how many were found.
  int remember_ranks();
  /// SIGKILL to every rank (each rank's process group, then the rank), one right after the other.
  /// Returns how many ranks were signalled.
  int kill_all_ranks();
  /// SIGKILL to rank `rank` alone; false when it is not running.
  bool kill_one_rank(int rank);

  /// Waits for the launcher to exit, reading (and logging) its output meanwhile; after `timeout`,
  /// kills it and its ranks. Returns its exit status (128 + signal when killed), or -1 when it had
  /// to be killed.
  int wait(std::chrono::milliseconds timeout);
  /// Whether the launcher has exited (reaps it without blocking).
  bool exited();
  int exit_code() const { return exit_code_; }
  pid_t pid() const { return pid_; }

 private:
  void log(const std::string& line);
  bool kill_rank(pid_t pid) const;

  pid_t pid_ = -1;
  std::vector<std::pair<int, pid_t>> ranks_;  // remembered by remember_ranks()
  int out_ = -1;
  int log_fd_ = -1;
  std::string pending_;
  bool reaped_ = false;
  int exit_code_ = -1;
};

}  // namespace crash
