// `dcpp inspect` and `dcpp verify` on the root of a CheckpointManager. inspect: one line per step
// directory with its step, whether it is committed, its manifest's time, loss and metrics, and its
// size on disk. verify: every committed checkpoint verified, with a result per step.

#include "dcpp_test.h"
#include "tools_test_util.h"

#include "inspect/inspect_command.h"

#include <dcpp/plugin/checkpoint_manager.h>

#include <nlohmann/json.hpp>

using dcpp::test::run_cli;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

dcpp::StateDict state_at(int64_t step) {
  dcpp::StateDict model;
  model.insert("w", at::arange(64, at::kFloat).add(step));
  dcpp::StateDict state;
  state.insert("model", model);
  state.insert("step", step);
  return state;
}

dcpp::SaveRequest request(int64_t step, double loss, double accuracy) {
  dcpp::SaveRequest r;
  r.step = step;
  r.epoch = step / 100;
  r.metrics["loss"] = loss;
  r.metrics["accuracy"] = accuracy;
  return r;
}

uint64_t size_on_disk(const fs::path& directory) {
  uint64_t size = 0;
  for (const auto& entry : fs::recursive_directory_iterator(directory)) {
    if (entry.is_regular_file()) size += entry.file_size();
  }
  return size;
}

// A root with full checkpoints of steps 100 and 200, an export of step 200, and the data of a
// save of step 300 that a killed job left uncommitted.
void make_root(const fs::path& root) {
  {
    dcpp::CheckpointManagerOptions options;
    options.with_root(root).with_async(false);
    dcpp::CheckpointManager manager(options);
    manager.save(state_at(100), request(100, 0.5, 0.75));
    manager.save(state_at(200), request(200, 0.25, 0.875));
    manager.export_state(state_at(200).at("model").dict(), request(200, 0.25, 0.875),
                         at::kBFloat16);
    manager.wait();
  }
  // A save a killed job left: its data, no commit.
  fs::copy(root / "step-00000200", root / "step-00000300.incomplete");
  fs::remove(root / "step-00000300.incomplete" / "dcpp_checkpoint.json");
}

}  // namespace

TEST_CASE("inspect on a manager root lists its steps from their manifests") {
  dcpp::test::TempDir dir;
  const fs::path root = dir / "ckpt";
  make_root(root);

  const auto cli = run_cli("inspect --json " + root.string());
  INFO(cli.output);
  REQUIRE(cli.exit_code == 0);
  const json listing = json::parse(cli.output);
  REQUIRE(listing["format"] == "dcpp-manager-root");
  const json& steps = listing["checkpoints"];
  REQUIRE(steps.size() == 4);
  const std::vector<std::string> directories = {"step-00000100", "step-00000200",
                                                "export-step-00000200", "step-00000300.incomplete"};
  for (std::size_t i = 0; i < steps.size(); ++i) {
    INFO(i);
    REQUIRE(steps[i]["directory"] == directories[i]);
    REQUIRE(steps[i]["size"].get<uint64_t>() == size_on_disk(root / directories[i]));
  }
  REQUIRE(steps[0]["step"] == 100);
  REQUIRE(steps[0]["committed"] == true);
  REQUIRE(steps[0]["state"] == "committed");
  REQUIRE(steps[0]["kind"] == "full");
  REQUIRE(steps[0]["epoch"] == 1);
  REQUIRE(steps[0]["metrics"] == json({{"accuracy", 0.75}, {"loss", 0.5}}));
  REQUIRE(steps[0]["committed_at"].get<double>() > 1.7e9);
  REQUIRE(steps[1]["metrics"]["loss"] == 0.25);
  REQUIRE(steps[2]["kind"] == "export");
  REQUIRE(steps[2]["committed"] == true);
  REQUIRE(steps[3]["step"] == 300);
  REQUIRE(steps[3]["committed"] == false);
  REQUIRE(steps[3]["state"] == "incomplete");
  REQUIRE(steps[3]["committed_at"].is_null());
  REQUIRE(steps[3]["metrics"].is_null());

  const auto text = run_cli("inspect " + root.string());
  INFO(text.output);
  REQUIRE(text.exit_code == 0);
  REQUIRE_THAT(text.output, Catch::Contains("4 checkpoint directories, 3 committed"));
  REQUIRE_THAT(text.output, Catch::Contains("accuracy=0.75 loss=0.5"));
  REQUIRE_THAT(text.output, Catch::Contains("incomplete"));
  std::size_t lines = std::count(text.output.begin(), text.output.end(), '\n');
  REQUIRE(lines == 6);  // a summary, a header, 4 directories

  // Stats and trees belong to one checkpoint: say which to inspect.
  const auto stats = run_cli("inspect --stats " + root.string());
  REQUIRE(stats.exit_code == 1);
  REQUIRE_THAT(stats.output, Catch::Contains((root / "step-00000200").string()));
}

TEST_CASE("verify on a manager root verifies every committed checkpoint, or one step's") {
  dcpp::test::TempDir dir;
  const fs::path root = dir / "ckpt";
  make_root(root);

  const auto cli = run_cli("verify --json " + root.string());
  INFO(cli.output);
  REQUIRE(cli.exit_code == 0);
  const json report = json::parse(cli.output);
  REQUIRE(report["ok"] == true);
  REQUIRE(report["format"] == "dcpp-manager-root");
  const json& checkpoints = report["checkpoints"];
  REQUIRE(checkpoints.size() == 3);
  const std::vector<std::string> directories = {"step-00000100", "step-00000200",
                                                "export-step-00000200"};
  for (std::size_t i = 0; i < checkpoints.size(); ++i) {
    INFO(i);
    REQUIRE(checkpoints[i]["directory"] == directories[i]);
    REQUIRE(checkpoints[i]["report"]["ok"] == true);
    REQUIRE(checkpoints[i]["report"]["items"].get<int64_t>() > 0);
  }
  REQUIRE(checkpoints[2]["kind"] == "export");
  REQUIRE(report["skipped"].size() == 1);
  REQUIRE(report["skipped"][0]["directory"] == "step-00000300.incomplete");

  const auto text = run_cli("verify " + root.string());
  INFO(text.output);
  REQUIRE(text.exit_code == 0);
  REQUIRE_THAT(text.output, Catch::Contains("== step-00000100 (step 100, full)"));
  REQUIRE_THAT(text.output, Catch::Contains("skipped: step-00000300.incomplete (incomplete"));
  REQUIRE_THAT(text.output,
               Catch::Contains("ok: " + root.string() + ": 3 committed checkpoints verified"));

  // A damaged step fails the root, names the step, and leaves the others ok.
  const fs::path data = root / "step-00000200" / "__0_0.distcp";
  REQUIRE(fs::exists(data));
  dcpp::test::flip_byte(data, static_cast<int64_t>(fs::file_size(data) / 2));
  const auto damaged = run_cli("verify " + root.string());
  INFO(damaged.output);
  REQUIRE(damaged.exit_code == 1);
  REQUIRE_THAT(damaged.output,
               Catch::Contains("failed: " + root.string() +
                               ": problems in step-00000200 (of 3 committed checkpoints)"));
  REQUIRE(run_cli("verify --step 100 " + root.string()).exit_code == 0);
  const auto step_200 = run_cli("verify --json --step 200 " + root.string());
  REQUIRE(step_200.exit_code == 1);
  const json only_200 = json::parse(step_200.output);
  REQUIRE(only_200["checkpoints"].size() == 2);  // the full checkpoint and the export
  REQUIRE(only_200["checkpoints"][0]["report"]["ok"] == false);
  REQUIRE(only_200["checkpoints"][1]["report"]["ok"] == true);

  // A step the root has no committed checkpoint of; --step on one checkpoint.
  const auto missing = run_cli("verify --step 700 " + root.string());
  REQUIRE(missing.exit_code == 1);
  REQUIRE_THAT(missing.output, Catch::Contains("no committed checkpoint of step 700") &&
                                   Catch::Contains("its committed steps: 100, 200"));
  const auto one = run_cli("verify --step 100 " + (root / "step-00000100").string());
  REQUIRE(one.exit_code == 1);
  REQUIRE_THAT(one.output, Catch::Contains("--step applies to a CheckpointManager's root"));
}
