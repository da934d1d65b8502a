// CheckpointKind and the manifest: the kind names dcpp_checkpoint.json has always stored ("full",
// "export") parse to the enum and back unchanged, so checkpoints written before the enum still
// load; a name no kind has is a CheckpointError naming the manifest.

#include "dcpp_test.h"

#include <dcpp/core/checkpoint_error.h>
#include <dcpp/plugin/checkpoint_info.h>
#include <dcpp/plugin/checkpoint_kind.h>

namespace fs = std::filesystem;
using dcpp::test::TempDir;

namespace {

// A checkpoint directory whose manifest is `manifest`, written as an earlier dcpp wrote it (the
// text, not through the enum), with an empty `.metadata` so that list_checkpoints considers it.
fs::path checkpoint_with_manifest(const fs::path& directory, const std::string& manifest) {
  fs::create_directories(directory);
  dcpp::test::write_file(directory / "dcpp_checkpoint.json", manifest);
  dcpp::test::write_file(directory / ".metadata", "listed, never read");  // an empty one is not
  return directory;
}

std::string manifest_of_kind(int64_t step, const std::string& kind_field) {
  return "{\n  \"format\": \"dcpp-managed-checkpoint-1\",\n  \"step\": " + std::to_string(step) +
         ",\n  \"epoch\": 1" + kind_field + ",\n  \"world_size\": 2\n}\n";
}

}  // namespace

TEST_CASE("each checkpoint kind has one manifest name, and that name parses back to it") {
  CHECK(std::string(dcpp::to_string(dcpp::CheckpointKind::kFull)) == "full");
  CHECK(std::string(dcpp::to_string(dcpp::CheckpointKind::kExport)) == "export");
  for (const auto kind : {dcpp::CheckpointKind::kFull, dcpp::CheckpointKind::kExport}) {
    CHECK(dcpp::parse_checkpoint_kind(dcpp::to_string(kind)) == kind);
  }
  for (const char* unknown : {"", "Full", "full ", "exported", "preempted"}) {
    CHECK_FALSE(dcpp::parse_checkpoint_kind(unknown).has_value());
  }
}

TEST_CASE("manifests with the kind as text load as the enum, and no kind means full") {
  TempDir dir;
  const fs::path full = checkpoint_with_manifest(dir / "step-00000010",
                                                 manifest_of_kind(10, ",\n  \"kind\": \"full\""));
  const fs::path exported = checkpoint_with_manifest(
      dir / "export-step-00000010", manifest_of_kind(10, ",\n  \"kind\": \"export\""));
  const fs::path without_kind =
      checkpoint_with_manifest(dir / "step-00000020", manifest_of_kind(20, ""));

  CHECK(dcpp::read_checkpoint_info(full).kind == dcpp::CheckpointKind::kFull);
  CHECK(dcpp::read_checkpoint_info(full).world_size == 2);
  CHECK(dcpp::read_checkpoint_info(exported).kind == dcpp::CheckpointKind::kExport);
  CHECK(dcpp::read_checkpoint_info(without_kind).kind == dcpp::CheckpointKind::kFull);
  // Only full checkpoints are listed (the export is not a step directory either way).
  std::vector<int64_t> steps;
  for (const dcpp::CheckpointInfo& info : dcpp::list_checkpoints(dir.path())) {
    steps.push_back(info.step);
  }
  CHECK(steps == std::vector<int64_t>{10, 20});
}

TEST_CASE("a manifest naming an unknown kind is a CheckpointError naming the file") {
  TempDir dir;
  const fs::path directory = checkpoint_with_manifest(
      dir / "step-00000030", manifest_of_kind(30, ",\n  \"kind\": \"preempted\""));
  const std::string manifest = (directory / "dcpp_checkpoint.json").string();
  CHECK_THROWS_AS(dcpp::read_checkpoint_info(directory), dcpp::CheckpointError);
  CHECK_THROWS_WITH(dcpp::read_checkpoint_info(directory), Catch::Contains(manifest));
  CHECK_THROWS_WITH(dcpp::read_checkpoint_info(directory), Catch::Contains("'preempted'"));
  // Listing skips it, as it skips any unreadable manifest: it is never taken for a checkpoint.
  CHECK(dcpp::list_checkpoints(dir.path()).empty());
}
