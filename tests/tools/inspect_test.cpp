#include "dcpp_test.h"
#include "tools_test_util.h"

#include "inspect/inspect_command.h"

#include <dcpp/checkpoint/checkpointer.h>
#include <dcpp/core/checkpoint_error.h>
#include <dcpp/version.h>

#include <nlohmann/json.hpp>

#include <array>
#include <cstdio>
#include <fstream>

using nlohmann::json;

using dcpp::test::CommandResult;
using dcpp::test::run_cli;

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

  REQUIRE(entries["step"]["kind"] == "bytes");
  REQUIRE(entries["step"]["path"] == json::array({"step"}));
  REQUIRE(entries["step"]["value"] == 7);
  REQUIRE(entries["step"]["bytes"].get<int64_t>() > 0);
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

  // The binary, main() included, as a user runs it; the other tests run the commands in-process.
  dcpp::test::TempDir dir;
  const CommandResult missing = dcpp::test::run_cli_binary("inspect " + (dir / "nothing").string());
  REQUIRE(missing.exit_code == 1);
  REQUIRE(missing.output.find(".metadata is missing") != std::string::npos);
  REQUIRE(std::count(missing.output.begin(), missing.output.end(), '\n') == 1);

  std::filesystem::create_directories(dir / "bad");
  std::ofstream(dir / "bad" / ".metadata") << "not a pickle";
  const CommandResult malformed = run_cli("inspect --json " + (dir / "bad").string());
  REQUIRE(malformed.exit_code == 1);
  REQUIRE(std::count(malformed.output.begin(), malformed.output.end(), '\n') == 1);

  // The version the headers were generated with (project()'s), without a command.
  const CommandResult version = dcpp::test::run_cli_binary("--version");
  REQUIRE(version.exit_code == 0);
  REQUIRE(version.output == std::string("dcpp ") + DCPP_VERSION + "\n");
  REQUIRE(std::string(DCPP_VERSION) == std::to_string(DCPP_VERSION_MAJOR) + "." +
                                           std::to_string(DCPP_VERSION_MINOR) + "." +
                                           std::to_string(DCPP_VERSION_PATCH));
}

TEST_CASE("inspect gives sizes per file and per top-level key, and a tree by real paths") {
  const auto ckpt = dcpp::test::fixture("model_optim_adam");
  const json inspection = dcpp::tools::inspect_checkpoint(ckpt, false);
  uint64_t items_bytes = 0;
  for (const auto& [name, file] : inspection["files"].items()) {
    INFO(name);
    REQUIRE(file["size"].get<uint64_t>() == std::filesystem::file_size(ckpt / name));
    REQUIRE(file["bytes"].get<uint64_t>() <= file["size"].get<uint64_t>());
    items_bytes += file["bytes"].get<uint64_t>();
  }
  uint64_t by_key = 0;
  int64_t entries = 0;
  for (const auto& [key, top] : inspection["top_level"].items()) {
    by_key += top["bytes"].get<uint64_t>();
    entries += top["entries"].get<int64_t>();
  }
  REQUIRE(by_key == items_bytes);
  REQUIRE(entries == static_cast<int64_t>(inspection["entries"].size()));
  REQUIRE(inspection["top_level"].contains("model"));
  REQUIRE(inspection["top_level"].contains("optim"));

  const CommandResult tree = run_cli("inspect --tree " + ckpt.string());
  INFO(tree.output);
  REQUIRE(tree.exit_code == 0);
  REQUIRE_THAT(tree.output, Catch::Contains("model/\n"));
  REQUIRE_THAT(tree.output, Catch::Contains("optim/\n  param_groups/\n    0/\n"));
  REQUIRE_THAT(tree.output, Catch::Contains("files:\n  __0_0.distcp"));
  REQUIRE_THAT(tree.output, Catch::Contains("top-level keys:\n"));

  const json with_tree = json::parse(run_cli("inspect --tree --json " + ckpt.string()).output);
  const json& state = with_tree["tree"]["optim"]["state"];
  REQUIRE(state.is_object());
  const auto first = state.begin();  // (items().begin() is a temporary: its key would dangle)
  REQUIRE((*first)["exp_avg"] == "optim.state." + first.key() + ".exp_avg");
}

TEST_CASE("inspect stats fold a tensor's chunks from several files into the whole tensor's") {
  // PyTorch's two-rank checkpoint: w_row split by rows, v_col by columns, across two files.
  const auto ckpt = dcpp::test::fixture("two_rank_sharded");
  const json entries = dcpp::tools::inspect_checkpoint(ckpt, true)["entries"];
  const dcpp::StateDict whole = dcpp::load_from_keys(ckpt);
  std::ifstream in(dcpp::test::fixture("two_rank_sharded.manifest.json"));
  const json manifest = json::parse(in)["state_dict"]["items"];
  for (const std::string key : {"w_row", "v_col", "bias_replicated"}) {
    INFO(key);
    const json& stats = entries[key]["stats"];
    REQUIRE(entries[key]["chunks"].size() >= 1);
    const at::Tensor t = whole.at(key).tensor().to(at::kDouble);
    REQUIRE(stats["sum"].get<double>() == Approx(manifest[key]["sum"].get<double>()));
    REQUIRE(stats["abs_sum"].get<double>() == Approx(manifest[key]["abs_sum"].get<double>()));
    REQUIRE(stats["min"].get<double>() == t.min().item<double>());
    REQUIRE(stats["max"].get<double>() == t.max().item<double>());
    REQUIRE(stats["mean"].get<double>() == Approx(t.mean().item<double>()));
    REQUIRE(stats["nan"] == 0);
    REQUIRE(stats["inf"] == 0);
  }
  REQUIRE(entries["w_row"]["chunks"].size() == 2);
  REQUIRE(entries["v_col"]["chunks"].size() == 2);

  // NaNs and infinities in different chunks of one sharded tensor, one chunk all NaN.
  dcpp::test::TempDir dir;
  dcpp::StateDict state;
  const at::Tensor full = at::tensor({1.0f, NAN, NAN, -4.0f, INFINITY, 6.0f}).reshape({3, 2});
  std::vector<dcpp::Shard> shards;
  for (int64_t row = 0; row < 3; ++row) {
    shards.push_back(dcpp::Shard{full.narrow(0, row, 1).clone(), {row, 0}});
  }
  state.insert("s", dcpp::ShardedTensor({3, 2}, shards));
  state.insert("e", at::empty({0, 4}));
  dcpp::save(state, dir / "ckpt");
  const json sharded = dcpp::tools::inspect_checkpoint(dir / "ckpt", true)["entries"];
  REQUIRE(sharded["s"]["chunks"].size() == 3);
  REQUIRE(sharded["s"]["stats"]["nan"] == 2);
  REQUIRE(sharded["s"]["stats"]["inf"] == 1);
  REQUIRE(sharded["s"]["stats"]["min"] == -4.0);
  REQUIRE(sharded["s"]["stats"]["abs_sum"].is_null());  // +inf
  REQUIRE(sharded["s"]["stats"]["max"].is_null());
  REQUIRE(sharded["e"]["stats"]["nan"] == 0);
  REQUIRE(sharded["e"]["stats"]["sum"] == 0.0);
  REQUIRE(sharded["e"]["stats"]["mean"].is_null());
}

TEST_CASE("inspect --tree --stats shows every tensor's stats in the tree") {
  const auto ckpt = dcpp::test::fixture("single_rank_mixed");
  const json entries = dcpp::tools::inspect_checkpoint(ckpt, true)["entries"];
  const CommandResult tree = run_cli("inspect --tree --stats " + ckpt.string());
  INFO(tree.output);
  REQUIRE(tree.exit_code == 0);
  std::size_t tensors = 0;
  for (const auto& [key, entry] : entries.items()) {
    if (entry["kind"] != "tensor") continue;
    ++tensors;
    INFO(key);
    REQUIRE_THAT(tree.output, Catch::Contains("  stats " + entry["stats"].dump() + "\n"));
  }
  std::size_t shown = 0;
  for (std::size_t at = tree.output.find("  stats {"); at != std::string::npos;
       at = tree.output.find("  stats {", at + 1)) {
    ++shown;
  }
  REQUIRE(shown == tensors);
}

TEST_CASE("inspect --json shows a Megatron-Core checkpoint's tensors, objects and common state") {
  const json inspection =
      dcpp::tools::inspect_checkpoint(dcpp::test::megatron_fixture("mcore_tp2"), false);
  REQUIRE(inspection["format"] == "megatron-core");
  const json& entries = inspection["entries"];
  CHECK(entries["decoder.layers.self_attention.linear_qkv.weight"]["shape"] ==
        json::array({2, 24, 8}));
  CHECK(entries["decoder.layers.self_attention.linear_qkv.weight"]["chunks"].size() == 4);
  const json& args = entries["common_state/shard_0_1"]["value"][0]["args"];
  CHECK(args["__class__"] == "argparse.Namespace");
  CHECK(args["name"] == "tiny-gpt");
  CHECK(args["hidden_size"] == 8);
  CHECK(entries["rng_state/shard_0.1_1.2"]["value"][0][0]["np_rng_state"][1] ==
        "<numpy.ndarray <u4 [4]>");
  CHECK(entries["train_state/shard_1_2"]["value"][0]["consumed_samples"] == 3201);
}
