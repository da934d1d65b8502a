#pragma once
// Starting the reshard worker (reshard/worker/reshard_worker.cpp) on several ranks with
// dcpp-launch.

#include "dcpp_test.h"

#include <string>

namespace dcpp::test {

/// Runs `dcpp-launch --fork -n ranks -- reshard_worker arguments` and returns its exit code; what
/// it printed goes to `output` when given, and into the test's report when it fails. `environment`:
/// variables for the ranks ("NAME=value ...").
inline int launch(int ranks, const std::string& arguments, std::string* output = nullptr,
                  const std::string& environment = "") {
  const std::string command = environment + (environment.empty() ? "" : " ") + DCPP_LAUNCH +
                              " --fork -n " + std::to_string(ranks) + " -- " + DCPP_RESHARD_WORKER +
                              " " + arguments;
  const CommandResult result = run_command(command);
  if (output != nullptr) {
    *output = result.output;
  }
  UNSCOPED_INFO(command << "\n" << result.output);
  return result.exit_code;
}

/// The checkpoint the reshard worker saves on 3 ranks in the row layout, made on first use and
/// shared by the test cases of this process that read it without changing it: a launch costs most
/// of a second of libtorch's start-up (its ranks fork after it), several seconds under a sanitizer.
inline const std::string& shared_row_checkpoint() {
  static const TempDir dir;
  static const std::string checkpoint = [] {
    const std::string path = (dir / "row").string();
    REQUIRE(launch(3, "save " + path + " row") == 0);
    return path;
  }();
  return checkpoint;
}

/// How many times `text` holds `what`.
inline std::size_t count(const std::string& text, const std::string& what) {
  std::size_t found = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) {
    ++found;
  }
  return found;
}

}  // namespace dcpp::test
