// The coordinator's commit (checkpoint/save_commit.h): a rank's malformed message of the writing
// step is an error that names the rank, and nothing is committed.

#include "dcpp_test.h"

#include <dcpp/storage/filesystem_writer.h>

#include "checkpoint/save_commit.h"
#include "planner/plan_codec.h"

#include <filesystem>
#include <string>
#include <vector>

TEST_CASE("a rank's malformed write results name the rank and commit nothing") {
  dcpp::test::TempDir dir;
  dcpp::FileSystemWriter writer(dir.path());
  writer.set_up(0, true);
  dcpp::Metadata metadata;
  metadata.state_dict_metadata.emplace_back("step", dcpp::BytesStorageMetadata{});
  const std::vector<std::string> messages{dcpp::detail::encode_written_items({}, {}),
                                          dcpp::detail::encode_strings({"one part"})};
  std::string message;
  try {
    dcpp::detail::commit_save(writer, metadata, messages, nullptr, dcpp::ReplicaCheck::kFail);
  } catch (const dcpp::CheckpointError& error) {
    CHECK(error.kind() == dcpp::ErrorKind::kCorrupt);
    message = error.what_without_backtrace();
  }
  CHECK_THAT(message, Catch::Contains("rank 1's write results") &&
                          Catch::Contains("every rank must run the same dcpp build"));
  CHECK_FALSE(std::filesystem::exists(dir.path() / ".metadata"));
  writer.abort_save();
}
