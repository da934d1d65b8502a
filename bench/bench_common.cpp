#include "bench_common.h"

#include <stdlib.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <stdexcept>
#include <string>

namespace bench {

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

double thread_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

double best_seconds(int repeat, const std::function<void()>& setup,
                    const std::function<void()>& run) {
  double best = 1e30;
  for (int i = 0; i < repeat; ++i) {
    setup();
    const auto start = Clock::now();
    run();
    best = std::min(best, seconds_since(start));
  }
  return best;
}

ResidentMemory resident_memory() {
  std::ifstream status("/proc/self/status");
  std::string line;
  ResidentMemory memory;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) memory.now_mib = std::stod(line.substr(6)) / 1024;
    if (line.rfind("VmHWM:", 0) == 0) memory.peak_mib = std::stod(line.substr(6)) / 1024;
  }
  return memory;
}

void reset_peak_memory() { std::ofstream("/proc/self/clear_refs") << "5"; }

long minor_faults() {
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  return usage.ru_minflt;
}

double seconds_per_fault(std::size_t mib) {
  const std::size_t bytes = mib << 20;
  const std::size_t page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  void* mapped = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mapped == MAP_FAILED) throw std::runtime_error("seconds_per_fault: mmap failed");
  ::madvise(mapped, bytes, MADV_NOHUGEPAGE);  // a fault per page, as a heap's growth takes them
  auto* bytes_at = static_cast<volatile char*>(mapped);
  const long faults_before = minor_faults();
  const auto start = Clock::now();
  for (std::size_t at = 0; at < bytes; at += page) bytes_at[at] = 1;
  const double seconds = seconds_since(start);
  const long faults = minor_faults() - faults_before;
  ::munmap(mapped, bytes);
  return faults > 0 ? seconds / static_cast<double>(faults) : 0.0;
}

void parse_or_exit(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    std::exit(app.exit(error) == 0 ? 0 : 2);
  }
}

TempDir::TempDir() {
  std::string pattern = (std::filesystem::temp_directory_path() / "dcpp-bench-XXXXXX").string();
  if (::mkdtemp(pattern.data()) == nullptr) {
    throw std::runtime_error("cannot make a temporary directory " + pattern);
  }
  path_ = pattern;
}

TempDir::~TempDir() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

}  // namespace bench
