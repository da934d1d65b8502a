// `dcpp-launch -n N [--nnodes H --node-rank K] [--master-addr A] [--master-port P] [--timeout S]
// [--fork] [--memory-root ROOT [--memory-job JOB]] [--] CMD ARGS...`: N local ranks of CMD with
// the torchrun variables set (see launcher.h); with a memory root, the job's newest memory step
// written to disk when it ends badly (memory_flush_step.h).

#include "launch/launcher.h"
#include "launch/memory_flush_step.h"

#include <dcpp/version.h>

#include <CLI/CLI.hpp>

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <exception>
#include <iostream>

namespace {

int interrupt_pipe[2] = {-1, -1};

// Async-signal-safe: one byte, the signal number, for the launcher's poll loop.
extern "C" void on_stop_signal(int signal) {
  const int saved = errno;
  const unsigned char byte = static_cast<unsigned char>(signal);
  [[maybe_unused]] const ssize_t n = ::write(interrupt_pipe[1], &byte, 1);
  errno = saved;
}

void install_signal_handlers() {
  if (::pipe2(interrupt_pipe, O_CLOEXEC | O_NONBLOCK) != 0) return;  // then no graceful stop
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  for (int signal : {SIGINT, SIGTERM, SIGHUP}) ::sigaction(signal, &action, nullptr);
  ::signal(SIGPIPE, SIG_IGN);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app(
      "dcpp-launch: starts N local ranks of a command with RANK, WORLD_SIZE, LOCAL_RANK, "
      "MASTER_ADDR and MASTER_PORT set, forwards their output as \"[rank R] ...\", and stops "
      "them all when one fails (exit code: the first failure's, 0 when all succeed)",
      "dcpp-launch");
  app.set_version_flag("--version", "dcpp-launch " DCPP_VERSION);
  dcpp::tools::LaunchOptions options;
  double timeout_s = 60.0;
  app.add_option("-n,--nproc", options.nproc, "number of ranks")
      ->required()
      ->check(CLI::PositiveNumber);
  app.add_option("--master-port", options.master_port,
                 "MASTER_PORT (default: a free port; required with several nodes)")
      ->check(CLI::Range(0, 65535));
  app.add_option("--master-addr", options.master_addr,
                 "MASTER_ADDR: node 0's address, where rank 0 serves the rendezvous store")
      ->capture_default_str();
  app.add_option("--nnodes", options.nnodes,
                 "hosts taking part, each running dcpp-launch with its --node-rank (as torchrun)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--node-rank", options.node_rank,
                 "this host's index in [0, nnodes): its ranks are node-rank x nproc + [0, nproc)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--timeout", timeout_s,
                 "seconds the other ranks get to exit after SIGTERM, once one has failed or the "
                 "launcher is interrupted, before SIGKILL: long enough for a step and a "
                 "preemption save")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_flag("--fork", options.fork,
               "start the command once and let it fork the ranks after its libraries are "
               "loaded (it must call dcpp::become_launched_rank() first in main()): one "
               "process's start-up instead of N");
  dcpp::tools::MemoryFlushStep memory;
  app.add_option("--memory-root", memory.root,
                 "a CheckpointManager root whose memory tier this job keeps: when a rank fails or "
                 "the launcher is stopped, once every rank has exited, the newest step all ranks "
                 "hold in memory is committed there (dcpp flush-memory) and the regions removed");
  app.add_option("--memory-job", memory.job,
                 "the memory tier's job name (MemoryTierOptions::job), when the job names it");
  // Everything from the command on (or after "--") is the command, its options included.
  app.prefix_command();
  app.footer(
      "The command and its arguments follow the options (or \"--\").\nExample: dcpp-launch -n 4 "
      "-- ./train --steps 100\n");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    return app.exit(error);
  }
  options.command = app.remaining();
  if (!options.command.empty() && options.command.front() == "--") {
    options.command.erase(options.command.begin());
  }
  if (options.command.empty()) {
    std::cerr << "dcpp-launch: no command to run\n" << app.help();
    return 2;
  }
  options.stop_grace = std::chrono::milliseconds(std::llround(timeout_s * 1000.0));
  install_signal_handlers();
  options.interrupt_fd = interrupt_pipe[0];
  int status = 1;
  try {
    status = dcpp::tools::launch(options);
  } catch (const std::exception& error) {
    std::cerr << error.what() << "\n";
  }
  if (status != 0 && !memory.root.empty()) {
    dcpp::tools::flush_memory_tier_of_job(memory, options.nproc, options.nnodes, options.node_rank);
  }
  return status;
}
