// A Megatron-LM save directory (`iter_NNNNNNN/` beside `latest_checkpointed_iteration.txt`) as
// the CKPT of every command: the iteration the tracker names, or `--step N` where a command has it.

#include "dcpp_test.h"
#include "tools_test_util.h"

#include <dcpp/plugin/checkpoint_info.h>

#include <nlohmann/json.hpp>

using dcpp::test::run_cli;
using nlohmann::json;

namespace {

namespace fs = std::filesystem;

// Megatron-Core's fixture saved as iterations 50 and 100 of a Megatron-LM save directory, the
// tracker naming `tracker`; iteration 100's data damaged, so that which one a command read shows.
fs::path megatron_lm_save_directory(const fs::path& root, const std::string& tracker) {
  fs::create_directories(root);
  for (const char* iteration : {"iter_0000050", "iter_0000100"}) {
    fs::copy(dcpp::test::megatron_fixture("mcore_tp2"), root / iteration,
             fs::copy_options::recursive);
    for (const fs::directory_entry& entry : fs::directory_iterator(root / iteration)) {
      fs::permissions(entry.path(), fs::perms::owner_write, fs::perm_options::add);
    }
  }
  const fs::path data = root / "iter_0000100" / "__0_0.distcp";
  dcpp::test::flip_byte(data, static_cast<int64_t>(fs::file_size(data) / 2));
  dcpp::test::write_file(root / dcpp::kMegatronTrackerFile, tracker);
  return root;
}

}  // namespace

TEST_CASE("every command takes a Megatron-LM save directory, at the tracker's iteration") {
  dcpp::test::TempDir dir;
  const fs::path root = megatron_lm_save_directory(dir / "save", "50");
  const std::string r = root.string();

  auto cli = run_cli("verify " + r);
  INFO(cli.output);
  CHECK(cli.exit_code == 0);
  CHECK_THAT(cli.output, Catch::Contains("iter_0000050"));
  cli = run_cli("verify " + r + " --step 100");
  INFO(cli.output);
  CHECK(cli.exit_code == 1);
  CHECK_THAT(cli.output, Catch::Contains("iter_0000100"));

  cli = run_cli("inspect " + r + " --json");
  INFO(cli.output);
  REQUIRE(cli.exit_code == 0);
  const json inspection = json::parse(cli.output);
  CHECK(inspection["format"] == "megatron-core");
  CHECK(inspection["megatron_lm_root"]["iteration"] == 50);
  CHECK(inspection["megatron_lm_root"]["directory"] == "iter_0000050");
  cli = run_cli("inspect " + r + " --step 100 --json");
  INFO(cli.output);
  REQUIRE(cli.exit_code == 0);
  CHECK(json::parse(cli.output)["megatron_lm_root"]["iteration"] == 100);

  cli = run_cli("convert " + r + " " + (dir / "out").string() + " --to dcp");
  INFO(cli.output);
  CHECK(cli.exit_code == 0);
  CHECK(fs::exists(dir / "out" / ".metadata"));
  cli = run_cli("diff " + r + " " + (root / "iter_0000050").string());
  INFO(cli.output);
  CHECK(cli.exit_code == 0);
  CHECK_THAT(cli.output, Catch::Contains("equal"));

  // A tracker naming an iteration that is not there: refused, naming it and what is there.
  dcpp::test::write_file(root / dcpp::kMegatronTrackerFile, "70");
  for (const std::string command : {"verify ", "inspect ", "diff "}) {
    cli = run_cli(command + r + (command == "diff " ? " " + r : ""));
    INFO(cli.output);
    CHECK(cli.exit_code == 1);
    CHECK_THAT(cli.output, Catch::Contains("iteration 70"));
    CHECK_THAT(cli.output, Catch::Contains("50, 100"));
  }
  // Without a tracker: the newest complete iteration.
  fs::remove(root / dcpp::kMegatronTrackerFile);
  cli = run_cli("inspect " + r + " --json");
  INFO(cli.output);
  REQUIRE(cli.exit_code == 0);
  CHECK(json::parse(cli.output)["megatron_lm_root"]["iteration"] == 100);
}
