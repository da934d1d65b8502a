// dcpp-launch's flush of a dead job's memory tier (memory_flush_step.h).

#include "launch/memory_flush_step.h"

#include <sys/wait.h>
#include <unistd.h>

#include <climits>
#include <iostream>
#include <string>
#include <vector>

namespace dcpp::tools {
namespace {

// The `dcpp` in this program's directory, else "dcpp" (looked up in PATH).
std::string dcpp_program() {
  char self[PATH_MAX] = {};
  const ssize_t n = ::readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n > 0) {
    std::string path(self, static_cast<std::size_t>(n));
    path = path.substr(0, path.rfind('/') + 1) + "dcpp";
    if (::access(path.c_str(), X_OK) == 0) return path;
  }
  return "dcpp";
}

}  // namespace

int flush_memory_tier_of_job(const MemoryFlushStep& step, int nproc, int nnodes, int node_rank) {
  if (node_rank != 0) {
    std::cerr << "dcpp-launch: node " << node_rank
              << " leaves writing the job's newest memory step to node 0; its regions stay\n";
    return 0;
  }
  std::vector<std::string> args = {dcpp_program(), "flush-memory", step.root, "--ranks",
                                   std::to_string(nproc * nnodes)};
  if (!step.job.empty()) {
    args.push_back("--job");
    args.push_back(step.job);
  }
  std::cerr << "dcpp-launch: writing the job's newest memory step to disk:";
  for (const std::string& arg : args) std::cerr << " " << arg;
  std::cerr << std::endl;
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  const pid_t child = ::fork();
  if (child < 0) return 127;
  if (child == 0) {
    ::execvp(argv[0], argv.data());
    ::_exit(127);
  }
  int status = 0;
  while (::waitpid(child, &status, 0) < 0) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace dcpp::tools
