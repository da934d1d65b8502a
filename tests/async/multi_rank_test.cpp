// async_save on several ranks: real processes started by dcpp-launch, Gloo on loopback; the
// checkpointer's collectives run on its own group while the training loop runs its own.

#include "dcpp_test.h"

#ifdef DCPP_ASYNC_WORKER

namespace {

dcpp::test::CommandResult launch(int ranks, const std::string& arguments) {
  const std::string command = std::string(DCPP_LAUNCH) + " -n " + std::to_string(ranks) + " -- " +
                              DCPP_ASYNC_WORKER + " " + arguments;
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
  }
  CHECK(result.seconds < 20);  // well within the groups' 30 s timeout: nobody waited for it
}

#endif
