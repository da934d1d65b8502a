#pragma once
// `dcpp-launch`: starts N local ranks of a command with the torchrun variables set, forwards
// their output line by line with a rank prefix, and stops them all when one fails.

#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

namespace dcpp::tools {

struct LaunchOptions {
  /// How many ranks to start on this host, at least 1.
  int nproc = 1;
  /// Several hosts, as torchrun's --nnodes and --node-rank: a launcher on each host starts its
  /// `nproc` ranks, RANK = node_rank x nproc + LOCAL_RANK, WORLD_SIZE = nnodes x nproc, every
  /// launcher with the same master address (on node 0's host) and port (which must then be given).
  int nnodes = 1;
  int node_rank = 0;
  /// MASTER_PORT; 0 picks a free port (see pick_free_port()).
  int master_port = 0;
  /// MASTER_ADDR.
  std::string master_addr = "127.0.0.1";
  /// After the first failure (or when the launcher is interrupted), the other ranks get SIGTERM;
  /// those still running this long after get SIGKILL. SIGTERM is a preemption signal for a
  /// CheckpointCallback, which saves at the next step end: the grace must cover a step and a
  /// save. Keep it below the scheduler's own grace (Slurm's KillWait, Kubernetes'
  /// terminationGracePeriodSeconds, both 30 s by default, often raised for training jobs).
  std::chrono::milliseconds stop_grace{std::chrono::seconds(60)};
  /// Each rank's stdout on a pseudo-terminal (when one can be opened; else a pipe), so that the C
  /// library line-buffers it as on a terminal: a rank that crashes has handed over every line it
  /// printed. Its stderr is a pipe (unbuffered anyway). False: a pipe, block-buffered; a rank
  /// must then flush what it prints.
  bool stdout_terminal = true;
  /// Start the program once and let it fork this host's ranks (dcpp::become_launched_rank(),
  /// <dcpp/dist/launched_rank.h>, which it must call first in main()): its libraries are loaded
  /// and initialised once, not once per rank. The ranks are otherwise as started one by one (the
  /// variables, output, process groups, stopping); the launcher's process becomes a child subreaper
  /// to reap them, and stays one. A program that does not fork them all fails the ranks it left out
  /// with 127.
  bool fork = false;
  /// The program and its arguments, looked up in PATH when the program has no '/'.
  std::vector<std::string> command;
  /// Where the ranks' prefixed stdout and stderr lines go.
  int stdout_fd = 1;
  int stderr_fd = 2;
  /// When >= 0, a readable file descriptor that becomes readable when the launcher is asked to
  /// stop (a self-pipe its SIGINT/SIGTERM handlers write one byte, the signal number, to): the
  /// ranks are then stopped as after a failure and launch() returns 128 + that byte.
  int interrupt_fd = -1;
};

/// Splits a byte stream into lines and writes each as "<prefix><line>\n" to a file descriptor
/// with one write per line (lines of different ranks do not interleave). A line longer than
/// kMaxLine is written in pieces of at least kMaxLine bytes. Write errors are ignored. Not
/// thread-safe.
class LinePrefixer {
 public:
  static constexpr std::size_t kMaxLine = 1 << 20;
  LinePrefixer(std::string prefix, int fd) : prefix_(std::move(prefix)), fd_(fd) {}
  /// Writes the complete lines of `data` (with what earlier calls left) and keeps the rest.
  void feed(const char* data, std::size_t size);
  /// Writes what is left as a last line (a stream that ended without a newline).
  void finish();

 private:
  void emit(const char* begin, std::size_t size);
  std::string prefix_;
  int fd_;
  std::string pending_;
};

/// Binds a TCP socket to `address`:0 and returns the port the kernel gave it (then closes it: the
/// port is free, though another process could take it before rank 0 binds it). Throws
/// std::runtime_error when no socket can be bound.
int pick_free_port(const std::string& address = "127.0.0.1");

/// Starts this host's ranks and waits for all of them. Each rank r runs `options.command` with
/// RANK=r, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK (the node rank), MASTER_ADDR,
/// MASTER_PORT (and the launcher's environment) in its own process group, its stdout (see
/// stdout_terminal) and stderr forwarded line by line as "[rank r] ..." to options.stdout_fd /
/// stderr_fd. The ranks of other hosts are their launchers' business.
///
/// Returns 0 when every rank exits with 0. When a rank fails (non-zero exit, or killed by a signal:
/// 128 + signal), the others' process groups get SIGTERM, then SIGKILL after options.stop_grace;
/// launch() returns the first failed rank's code once all have exited (and their output has been
/// forwarded). A command that cannot be started fails its rank with 127.
///
/// The ranks die with the launcher: each gets SIGKILL when the launcher's process dies, however it
/// dies (SIGKILL included), through PR_SET_PDEATHSIG, set before the rank's program runs (forked
/// ranks set it once they are the launcher's children, become_launched_rank()); a rank whose
/// launcher died before that exits at once. The signal comes when the thread that called launch()
/// (forked ranks: the process's main thread) ends, which is only after every rank has exited
/// (launch() returns no sooner) or when the process dies. The helpers a rank started have no such
/// link: a rank's process group is signalled only when the launcher stops the ranks itself. Blocks;
/// waits with poll() on the output pipes, a pidfd per rank and options.interrupt_fd, never by
/// sleeping. Throws std::invalid_argument for bad options and std::runtime_error when a pipe or
/// process cannot be made (ranks already started are killed first). Not thread-safe (one launch at
/// a time per process).
int launch(const LaunchOptions& options);

}  // namespace dcpp::tools
