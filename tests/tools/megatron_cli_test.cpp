// `dcpp convert --to megatron` and back: Megatron-Core's own checkpoint (tests/fixtures/
// megatron-core/mcore_tp2) keeps every tensor, ShardedObject and its common state; a DCP
// checkpoint's values become the common state.

#include "dcpp_test.h"
#include "tools_test_util.h"

#include "verify/verify_command.h"

#include <dcpp/checkpoint/checkpointer.h>
#include <dcpp/checkpoint/megatron.h>
#include <dcpp/state_dict/whole_value.h>
#include <dcpp/storage/checkpoint_layout.h>

#include <nlohmann/json.hpp>

using dcpp::test::run_cli;

namespace {

namespace fs = std::filesystem;

// Every item of the checkpoint at `dir`: tensors whole, values whole.
dcpp::StateDict everything_in(const fs::path& dir) {
  dcpp::StateDict state;
  for (const auto& [key, entry] : dcpp::read_metadata(dir).state_dict_metadata) {
    if (const auto* tensor = std::get_if<dcpp::TensorStorageMetadata>(&entry)) {
      state.insert(key,
                   at::empty(tensor->size, at::TensorOptions().dtype(tensor->properties.dtype)));
    } else {
      state.insert(key, dcpp::whole_value(c10::IValue()));
    }
  }
  dcpp::load(state, dir);
  return state;
}

void require_same_items(const dcpp::StateDict& a, const dcpp::StateDict& b) {
  REQUIRE(a.size() == b.size());
  for (const auto& item : a) {
    INFO(item.key);
    REQUIRE(b.contains(item.key));
    if (item.value.is_tensor()) {
      CHECK(dcpp::test::bitwise_equal(b.at(item.key).tensor(), item.value.tensor()));
    } else {
      CHECK(dcpp::test::same_value(b.at(item.key).value(), item.value.value()));
    }
  }
}

}  // namespace

TEST_CASE("convert --to megatron keeps all of Megatron's own checkpoint, which converts back") {
  dcpp::test::TempDir dir;
  const fs::path fixture = dcpp::test::megatron_fixture("mcore_tp2");
  const fs::path out = dir / "iter_0000100";
  const auto cli =
      run_cli("convert " + fixture.string() + " " + out.string() + " --to megatron --integrity");
  INFO(cli.output);
  REQUIRE(cli.exit_code == 0);
  CHECK_THAT(cli.output, Catch::Contains("converted 13 tensors"));
  CHECK_THAT(cli.output, Catch::Contains((out / "metadata.json").string()));
  CHECK(dcpp::checkpoint_layout(out)->name() == dcpp::kMegatronLayout);
  CHECK(dcpp::test::read_file(out / "metadata.json") ==
        dcpp::test::read_file(fixture / "metadata.json"));
  require_same_items(everything_in(fixture), everything_in(out));
  CHECK(dcpp::megatron::load_content_metadata(out).at("format_version").value().toInt() == 1);

  const nlohmann::json verified = dcpp::tools::verify_checkpoint(out);
  INFO(verified.dump());
  CHECK(verified["ok"] == true);
  CHECK(verified["integrity_file"] == "checked");

  // And to DCP: a ShardedObject's payload, a list of a dict holding tensors, stays one item.
  REQUIRE(
      run_cli("convert " + out.string() + " " + (dir / "dcp").string() + " --to dcp").exit_code ==
      0);
  CHECK(dcpp::checkpoint_layout(dir / "dcp")->name() == dcpp::kDcpLayout);
  require_same_items(everything_in(fixture), everything_in(dir / "dcp"));
}

TEST_CASE("a DCP checkpoint converts to Megatron's layout with its values as the common state") {
  dcpp::test::TempDir dir;
  dcpp::StateDict saved;
  saved.insert("model.weight", at::randn({4, 3}));
  saved.insert("model.bias", at::randn({4}).to(at::kBFloat16));
  saved.insert("step", 42);
  dcpp::StateDict train;
  train.insert("lr", 0.5);
  train.insert("counts", at::arange(3));
  saved.insert("train", std::move(train));
  dcpp::save(saved, dir / "dcp");

  const auto cli = run_cli("convert " + (dir / "dcp").string() + " " + (dir / "mcore").string() +
                           " --to megatron");
  INFO(cli.output);
  REQUIRE(cli.exit_code == 0);
  const dcpp::StateDict common = dcpp::megatron::load_common_state_dict(dir / "mcore");
  CHECK(common.at("step").value().toInt() == 42);
  CHECK(common.at("train").dict().at("lr").value().toDouble() == 0.5);
  dcpp::StateDict tensors;
  tensors.insert("model.weight", at::zeros({4, 3}));
  tensors.insert("model.bias", at::zeros({4}, at::kBFloat16));
  tensors.insert("train.counts", at::zeros({3}, at::kLong));
  dcpp::load(tensors, dir / "mcore");
  CHECK(dcpp::test::bitwise_equal(tensors.at("model.weight").tensor(),
                                  saved.at("model.weight").tensor()));
  CHECK(dcpp::test::bitwise_equal(tensors.at("model.bias").tensor(),
                                  saved.at("model.bias").tensor()));
  CHECK(dcpp::test::bitwise_equal(tensors.at("train.counts").tensor(), at::arange(3)));
}

TEST_CASE("convert's Megatron options and what torch-save cannot hold are clear errors") {
  dcpp::test::TempDir dir;
  const fs::path fixture = dcpp::test::megatron_fixture("mcore_tp2");
  auto cli =
      run_cli("convert " + fixture.string() + " " + (dir / "x").string() + " --to dcp --integrity");
  CHECK(cli.exit_code != 0);
  CHECK_THAT(cli.output, Catch::Contains("--integrity applies to --to megatron only"));
  cli = run_cli("convert " + fixture.string() + " " + (dir / "x.pt").string() + " --to torch-save");
  CHECK(cli.exit_code != 0);
  CHECK_THAT(cli.output, Catch::Contains("numpy.ndarray is a Python object"));
  CHECK_FALSE(fs::exists(dir / "x.pt"));
}

TEST_CASE("convert --drop leaves out the entries under a prefix, ShardedObjects by their key") {
  dcpp::test::TempDir dir;
  const fs::path fixture = dcpp::test::megatron_fixture("mcore_tp2");
  const auto cli = run_cli("convert " + fixture.string() + " " + (dir / "out").string() +
                           " --to megatron --drop rng_state decoder.layers.mlp");
  INFO(cli.output);
  REQUIRE(cli.exit_code == 0);
  dcpp::StateDict expected = everything_in(fixture);
  for (const std::string key :
       {"rng_state/shard_0.0_1.2", "rng_state/shard_0.1_1.2",
        "decoder.layers.mlp.linear_fc1.weight", "decoder.layers.mlp.linear_fc2.weight"}) {
    REQUIRE(expected.erase(key));
  }
  require_same_items(expected, everything_in(dir / "out"));
  const auto none = run_cli("convert " + fixture.string() + " " + (dir / "none").string() +
                            " --to dcp --drop rng");
  CHECK(none.exit_code != 0);
  CHECK_THAT(none.output, Catch::Contains("--drop 'rng' matches no key"));
  // Without its common state a Megatron checkpoint is none: refused before anything is written.
  const auto no_common =
      run_cli("convert " + fixture.string() + " " + (dir / "no-common").string() +
              " --to megatron --drop common_state");
  CHECK(no_common.exit_code != 0);
  CHECK_THAT(no_common.output, Catch::Contains("leave out the Megatron-Core checkpoint's common "
                                               "state (common_state/shard_0_1)"));
  CHECK_FALSE(std::filesystem::exists(dir / "no-common" / "metadata.json"));
}

TEST_CASE(
    "a legacy Megatron checkpoint's common.pt reads as the common state current Megatron writes") {
  dcpp::test::TempDir dir;
  const fs::path legacy = dcpp::test::megatron_fixture("mcore_legacy_common_pt");
  const auto inspect = run_cli("inspect " + legacy.string());
  INFO(inspect.output);
  CHECK_THAT(inspect.output, Catch::Contains("common_state/shard_0_1"));
  CHECK_THAT(inspect.output, Catch::Contains("\"iteration\":100"));
  // Converted, the checkpoint is current Megatron's: its common state an item, as read before.
  REQUIRE(run_cli("convert " + legacy.string() + " " + (dir / "now").string() + " --to megatron")
              .exit_code == 0);
  CHECK_FALSE(fs::exists(dir / "now" / "common.pt"));
  const dcpp::StateDict before = dcpp::megatron::load_common_state_dict(legacy);
  const dcpp::StateDict after = dcpp::megatron::load_common_state_dict(dir / "now");
  CHECK(dcpp::test::same_value(dcpp::whole_value(after), dcpp::whole_value(before)));
}
