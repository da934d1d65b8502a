#pragma once
// Helpers for the command-line tests: running the `dcpp` binary and editing checkpoint files.

#include "dcpp_test.h"

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>

namespace dcpp::test {

inline CommandResult run_cli(const std::string& arguments) {
  return run_command(std::string(DCPP_CLI) + " " + arguments);
}

/// Copies a checkpoint directory (or a file) to `to`.
inline void copy_tree(const std::filesystem::path& from, const std::filesystem::path& to) {
  std::filesystem::copy(from, to, std::filesystem::copy_options::recursive);
}

/// The offset of the first occurrence of `needle` in the file, or -1.
inline int64_t find_bytes(const std::filesystem::path& file, const std::string& needle) {
  const std::string bytes = read_file(file);
  const std::size_t at = bytes.find(needle);
  return at == std::string::npos ? -1 : static_cast<int64_t>(at);
}

/// Flips the bits of the byte at `offset`.
inline void flip_byte(const std::filesystem::path& file, int64_t offset) {
  std::string bytes = read_file(file);
  bytes.at(static_cast<std::size_t>(offset)) ^= static_cast<char>(0xff);
  write_file(file, bytes);
}

/// Runs `command` through /bin/sh with output to /dev/null; returns the exit status and the
/// child's peak resident memory in bytes.
inline std::pair<int, int64_t> run_measuring_memory(const std::string& command) {
  const pid_t pid = fork();
  if (pid == 0) {
    const std::string quiet = command + " >/dev/null 2>&1";
    execl("/bin/sh", "sh", "-c", quiet.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  struct rusage usage;
  std::memset(&usage, 0, sizeof(usage));
  wait4(pid, &status, 0, &usage);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, static_cast<int64_t>(usage.ru_maxrss) * 1024};
}

}  // namespace dcpp::test
