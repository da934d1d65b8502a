// async_save on several ranks: real processes started by dcpp-launch, Gloo on loopback; the
// checkpointer's collectives run on its own group while the training loop runs its own.

#include "dcpp_test.h"

#include <string>

#ifdef DCPP_ASYNC_WORKER

namespace {

dcpp::test::CommandResult launch(int ranks, const std::string& arguments) {
  const std::string command = std::string(DCPP_LAUNCH) + " --fork -n " + std::to_string(ranks) +
                              " -- " + DCPP_ASYNC_WORKER + " " + arguments;
  dcpp::test::CommandResult result = dcpp::test::run_command(command);
  UNSCOPED_INFO(command << "\n" << result.output);
  return result;
}

}  // namespace

TEST_CASE("async saves on 3 ranks hold the save-time values while training collectives run") {
  dcpp::test::TempDir dir;
  const dcpp::test::CommandResult result = launch(3, "save " + dir.str());
  REQUIRE(result.exit_code == 0);
  for (const char* rank : {"[rank 0]", "[rank 1]", "[rank 2]"}) {
    CHECK(result.output.find(std::string(rank) + " saved 3") != std::string::npos);
  }
}

TEST_CASE("a rank failing to stage fails the async save on every rank at once, naming it") {
  dcpp::test::TempDir dir;
  const dcpp::test::CommandResult result = launch(3, "fail " + dir.str());
  REQUIRE(result.exit_code == 0);
  for (const char* rank : {"[rank 0]", "[rank 1]", "[rank 2]"}) {
    CHECK(result.output.find(std::string(rank) + " failed as expected") != std::string::npos);
    // Timed from async_save, not from the launch (three processes starting under a sanitizer
    // on busy cores take tens of seconds): well under the groups' 300 s timeout, so nobody
    // waited for it.
    const std::string failed_after = std::string(rank) + " failed after ";
    const std::size_t at = result.output.find(failed_after);
    REQUIRE(at != std::string::npos);
    CHECK(std::stoll(result.output.substr(at + failed_after.size())) < 100000);
  }
}

#endif
