// parallel_for when threads cannot be had: the work is still done, on the threads that started.

#include "dcpp_test.h"

#include "parallel_for.h"

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <string>

namespace {

// This process's address space now, in bytes (VmSize).
uint64_t address_space_bytes() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmSize:", 0) == 0) return std::stoull(line.substr(7)) * 1024;
  }
  return 0;
}

}  // namespace

TEST_CASE("parallel_for does all the work when no thread can be started") {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  SUCCEED("sanitizer runtimes reserve address space of their own: a plain build runs this");
#else
  // In a child: its address space capped 2 MiB above what it uses, so no thread stack (8 MiB)
  // can be mapped and every std::thread constructor throws.
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    const rlim_t cap = address_space_bytes() + (2u << 20);
    const rlimit limit{cap, cap};
    if (setrlimit(RLIMIT_AS, &limit) != 0) _exit(3);
    std::atomic<int> done[16] = {};
    dcpp::detail::parallel_for(16, 4, [&](std::size_t i) { done[i] += 1; });
    for (const auto& count : done) {
      if (count != 1) _exit(1);
    }
    _exit(0);
  }
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  INFO("child status " << status << (WIFSIGNALED(status) ? " (killed by a signal)" : ""));
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
#endif
}
