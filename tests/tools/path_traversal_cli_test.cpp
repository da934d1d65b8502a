// `dcpp verify`, `dcpp inspect` and `dcpp convert` refuse the file names in `.metadata` that a
// load refuses (tests/checkpoint/path_traversal_test.cpp): a valid copy of the data file waits
// where each hostile name points, so that a missing check would read it.

#include "tools_test_util.h"

#include <dcpp/checkpoint/checkpointer.h>

using dcpp::test::run_cli;
namespace fs = std::filesystem;

namespace {

/// `.metadata` with every data file name "__0_0.distcp" replaced by `name` (at least as long: the
/// pickle's frame length then undercounts, which readers accept, as frames are read-ahead hints).
std::string renamed(std::string metadata, const std::string& name) {
  const std::string from = std::string("\x8c\x0c") + "__0_0.distcp";
  const std::string to = std::string("\x8c") + static_cast<char>(name.size()) + name;
  std::size_t replaced = 0;
  for (std::size_t at = metadata.find(from); at != std::string::npos;
       at = metadata.find(from, at + to.size())) {
    metadata.replace(at, from.size(), to);
    ++replaced;
  }
  REQUIRE(replaced > 0);
  return metadata;
}

}  // namespace

TEST_CASE("the dcpp commands refuse data file names outside the checkpoint") {
  dcpp::test::TempDir root;
  const fs::path checkpoint = root / "ckpt";
  dcpp::StateDict sd;
  sd.insert("w", at::arange(12, at::kFloat).reshape({3, 4}));
  sd.insert("step", 3);
  dcpp::save(sd, checkpoint);
  // The test rewrites .metadata: without the checksum file, which would refuse it before the
  // checks under test.
  fs::remove(checkpoint / ".checksums");
  dcpp::test::write_file(root / "outside.distcp",
                         dcpp::test::read_file(checkpoint / "__0_0.distcp"));
  fs::create_directories(checkpoint / "a");
  const std::string pristine = dcpp::test::read_file(checkpoint / ".metadata");
  const std::vector<std::string> names = {"../outside.distcp", "a/../../outside.distcp",
                                          (root / "outside.distcp").string()};
  const char* formats[] = {"torch-save", "safetensors", "dcp"};
  for (std::size_t i = 0; i < names.size(); ++i) {
    const std::string& name = names[i];
    INFO("relative_path '" << name << "'");
    // A hostile .metadata comes without the checksum file dcpp writes beside it.
    dcpp::test::write_file(checkpoint / ".metadata", renamed(pristine, name));
    fs::remove(checkpoint / ".checksums");
    REQUIRE_THROWS_WITH(dcpp::read_metadata(checkpoint),
                        Catch::Contains("not inside the checkpoint directory"));

    const auto verify = run_cli("verify " + checkpoint.string());
    REQUIRE(verify.exit_code == 1);
    REQUIRE_THAT(verify.output, Catch::Contains("the file is not inside the checkpoint directory"));

    const auto inspect = run_cli("inspect --json " + checkpoint.string());
    REQUIRE(inspect.exit_code == 1);
    REQUIRE_THAT(inspect.output, Catch::Contains("not inside the checkpoint directory"));

    // Every format reads the source alike: each name is tried with one of them.
    const char* format = formats[i];
    const fs::path out = root / (std::string("out.") + format);
    const auto convert =
        run_cli("convert " + checkpoint.string() + " " + out.string() + " --to " + format);
    INFO("convert --to " << format);
    REQUIRE(convert.exit_code == 1);
    REQUIRE_THAT(convert.output, Catch::Contains("not inside the checkpoint directory"));
    REQUIRE_FALSE(fs::exists(out));
  }
  // With the real names, every command succeeds: the refusals above are the names'.
  dcpp::test::write_file(checkpoint / ".metadata", pristine);
  REQUIRE(run_cli("verify " + checkpoint.string()).exit_code == 0);
  REQUIRE(run_cli("inspect --json " + checkpoint.string()).exit_code == 0);
  REQUIRE(run_cli("convert " + checkpoint.string() + " " + (root / "out.pt").string() +
                  " --to torch-save")
              .exit_code == 0);
}
