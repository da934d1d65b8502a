#pragma once
// What every benchmark measures with: wall and thread-CPU clocks, best-of-N timing, this process's
// memory, and CLI11 command lines.

#include <CLI/CLI.hpp>

#include <chrono>
#include <cstddef>
#include <filesystem>
#include <functional>

namespace bench {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start);

/// CPU time of the calling thread: what a phase costs on a machine that other work also keeps busy.
double thread_cpu_seconds();

/// The shortest of `repeat` timed runs of `run`, each after an untimed `setup`.
double best_seconds(int repeat, const std::function<void()>& setup,
                    const std::function<void()>& run);

/// This process's resident memory now and at its peak, MiB (VmRSS and VmHWM of /proc/self/status).
struct ResidentMemory {
  double now_mib = 0;
  double peak_mib = 0;
};
ResidentMemory resident_memory();

/// Starts a new peak: VmHWM becomes VmRSS (writes 5 to /proc/self/clear_refs, Linux 4.0+).
void reset_peak_memory();

/// Minor page faults this process has taken so far (getrusage).
long minor_faults();

/// What one minor fault costs on this machine: a fresh anonymous mapping of `mib` MiB touched a
/// page at a time, its time over its faults. The baseline that tells a phase's page-fault share
/// (its faults times this) from the rest, on a VM where a fault costs ten times bare metal's.
double seconds_per_fault(std::size_t mib = 256);

/// A new directory under the system's temporary directory, removed with what it holds.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

/// Parses the command line into `app`'s options; on --help or an error prints CLI11's message and
/// exits (0 for --help, 2 for an error).
void parse_or_exit(CLI::App& app, int argc, char** argv);

}  // namespace bench
