#include "bench_common.h"

#include <stdlib.h>
#include <time.h>

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
