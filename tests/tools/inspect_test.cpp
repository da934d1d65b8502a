#include "dcpp_test.h"

#include "inspect_command.h"

#include <dcpp/checkpoint/checkpointer.h>
#include <dcpp/core/checkpoint_error.h>

#include <nlohmann/json.hpp>

#include <array>
#include <cstdio>
#include <fstream>

using nlohmann::json;

namespace {

using dcpp::test::CommandResult;

CommandResult run_cli(const std::string& arguments) {
  return dcpp::test::run_command(std::string(DCPP_CLI) + " " + arguments);
}

}  // namespace

TEST_CASE("inspect --json describes every entry of a PyTorch checkpoint") {
  const json inspection =
      dcpp::tools::inspect_checkpoint(dcpp::test::fixture("single_rank_mixed"), true);
  REQUIRE(inspection["format"] == "pytorch-dcp");
  REQUIRE(inspection["version"].is_null());
  const json& entries = inspection["entries"];

  const json& weight = entries["model.linear.weight"];
  REQUIRE(weight["kind"] == "tensor");
  REQUIRE(weight["path"] == json::array({"model", "linear.weight"}));
  REQUIRE(weight["dtype"] == "float32");
  REQUIRE(weight["shape"] == json::array({8, 4}));
  REQUIRE(weight["chunks"].size() == 1);
  REQUIRE(weight["chunks"][0]["file"] == "__0_0.distcp");
  REQUIRE(weight["chunks"][0]["offsets"] == json::array({0, 0}));
  REQUIRE(weight["chunks"][0]["length"].get<int64_t>() > 32 * 4);

  // Stats match the manifest Python wrote.
  std::ifstream in(dcpp::test::fixture("single_rank_mixed.manifest.json"));
  const json manifest = json::parse(in);
  const json& expected = manifest["state_dict"]["items"]["model"]["items"]["linear.weight"];
  REQUIRE(weight["stats"]["sum"].get<double>() == Approx(expected["sum"].get<double>()));
  REQUIRE(weight["stats"]["abs_sum"].get<double>() == Approx(expected["abs_sum"].get<double>()));
  REQUIRE(weight["stats"]["nan"] == 0);
  REQUIRE(entries["model.empty"]["stats"]["min"].is_null());

  REQUIRE(entries["step"] == json({{"kind", "bytes"}, {"path", {"step"}}, {"value", 7}}));
  REQUIRE(entries["betas"]["value"] == json::array({0.9, 0.999}));
  REQUIRE(entries["history"]["value"] == json::array({1, 2, 3}));
  REQUIRE(entries["name"]["value"] == "abc");
}

TEST_CASE("inspect stats count NaNs and infinities and skip NaNs") {
  dcpp::test::TempDir dir;
  dcpp::StateDict state;
  state.insert("t", at::tensor({1.0f, NAN, INFINITY, -2.0f}));
  state.insert("c", at::tensor({3.0, 0.0}).view({1, 2}).to(at::kComplexDouble));
  dcpp::save(state, dir / "ckpt");
  const json entries = dcpp::tools::inspect_checkpoint(dir / "ckpt", true)["entries"];
  REQUIRE(entries["t"]["stats"]["nan"] == 1);
  REQUIRE(entries["t"]["stats"]["inf"] == 1);
  REQUIRE(entries["t"]["stats"]["min"] == -2.0);
  REQUIRE(entries["t"]["stats"]["max"].is_null());  // +inf has no JSON form
  REQUIRE(entries["c"]["dtype"] == "complex128");
  REQUIRE(entries["c"]["stats"]["sum"] == 3.0);
}

TEST_CASE("the dcpp command prints JSON and fails with one line on a bad checkpoint") {
  const CommandResult ok =
      run_cli("inspect --json " + dcpp::test::fixture("two_rank_sharded").string());
  REQUIRE(ok.exit_code == 0);
  const json inspection = json::parse(ok.output);
  REQUIRE(inspection["entries"]["w_row"]["chunks"].size() == 2);
  REQUIRE(inspection["entries"]["w_row"]["chunks"][1]["file"] == "__1_0.distcp");
  REQUIRE(inspection["entries"]["w_row"]["chunks"][1]["rank"] == 1);
  REQUIRE(inspection["entries"]["w_row"]["chunks"][0]["rank"] == 0);

  dcpp::test::TempDir dir;
  const CommandResult missing = run_cli("inspect " + (dir / "nothing").string());
  REQUIRE(missing.exit_code == 1);
  REQUIRE(missing.output.find(".metadata is missing") != std::string::npos);
  REQUIRE(std::count(missing.output.begin(), missing.output.end(), '\n') == 1);

  std::filesystem::create_directories(dir / "bad");
  std::ofstream(dir / "bad" / ".metadata") << "not a pickle";
  const CommandResult malformed = run_cli("inspect --json " + (dir / "bad").string());
  REQUIRE(malformed.exit_code == 1);
  REQUIRE(std::count(malformed.output.begin(), malformed.output.end(), '\n') == 1);
}
