#pragma once
// Helpers for the command-line tests: running the `dcpp` command line (in this process, or the
// binary) and editing checkpoint files.

#include "cli.h"
#include "dcpp_test.h"

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

namespace dcpp::test {

/// Runs the `dcpp` binary with `arguments` through the shell, as a user does (main() included).
inline CommandResult run_cli_binary(const std::string& arguments) {
  return run_command(std::string(DCPP_CLI) + " " + arguments);
}

/// Runs the `dcpp` command line with `arguments` (split at spaces; no quoting) in this process:
/// dcpp::tools::run_cli, all that the binary's main() runs but for a malloc setting that only the
/// peak-memory tests (which run the binary) see. A command then costs no process start, 0.75 s of
/// CPU for libtorch's alone. Its stdout and stderr come back together in the order written, as
/// `dcpp ARGUMENTS 2>&1` gives them. Not thread-safe: descriptors 1 and 2 are redirected while it
/// runs.
inline CommandResult run_cli(const std::string& arguments) {
  std::vector<std::string> words{"dcpp"};
  std::istringstream split(arguments);
  for (std::string word; split >> word;) words.push_back(word);
  std::vector<char*> argv;
  for (std::string& word : words) argv.push_back(word.data());
  argv.push_back(nullptr);

  std::FILE* capture = std::tmpfile();
  REQUIRE(capture != nullptr);
  // Descriptors 1 and 2 point into `capture` for the command only: restored however it ends, so
  // Catch2's own report is never written into the capture.
  struct Redirection {
    int saved_out = -1, saved_err = -1;
    explicit Redirection(int into) {
      std::cout.flush();
      std::fflush(nullptr);
      saved_out = ::dup(1);
      saved_err = ::dup(2);
      ::dup2(into, 1);
      ::dup2(into, 2);
    }
    ~Redirection() {
      std::cout.flush();
      std::cerr.flush();
      std::fflush(nullptr);
      ::dup2(saved_out, 1);
      ::dup2(saved_err, 2);
      ::close(saved_out);
      ::close(saved_err);
    }
  };
  int code = 0;
  const auto start = std::chrono::steady_clock::now();
  {
    const Redirection redirection(::fileno(capture));
    REQUIRE((redirection.saved_out >= 0 && redirection.saved_err >= 0));
    code = dcpp::tools::run_cli(static_cast<int>(words.size()), argv.data());
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  std::string output;
  std::fseek(capture, 0, SEEK_SET);  // the descriptors shared its offset
  std::array<char, 4096> buffer{};
  while (const std::size_t n = std::fread(buffer.data(), 1, buffer.size(), capture)) {
    output.append(buffer.data(), n);
  }
  std::fclose(capture);
  return {code, output, seconds};
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
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1,
          static_cast<int64_t>(usage.ru_maxrss) * 1024};
}

}  // namespace dcpp::test
