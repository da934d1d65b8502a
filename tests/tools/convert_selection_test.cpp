// What `dcpp convert` writes of its source: `--dtype` casts floating tensors but never 0-dim ones
// (optimizer counters such as Adam's `step`), and `--keys` converts only the entries under the
// given FQN prefixes.

#include "dcpp_test.h"
#include "tools_test_util.h"

#include "convert/checkpoint_source.h"

#include <dcpp/checkpoint/checkpointer.h>

#include <map>

using dcpp::test::run_cli;
namespace fs = std::filesystem;

namespace {

// What an Adam checkpoint holds: parameters, moments, and 0-dim float32 counters.
dcpp::StateDict adam_like_state() {
  dcpp::StateDict model;
  model.insert("w", at::linspace(-1.0, 1.0, 12, at::kFloat).view({4, 3}).add(1.0 / 3));
  model.insert("b", at::full({3}, 0.1f));
  dcpp::StateDict param_state;
  // As PyTorch and dcpp's optimizer codecs store it: a float32 0-dim tensor. bfloat16's nearest
  // to 550 is 552: a counter must not move.
  param_state.insert("step", at::scalar_tensor(550.0, at::kFloat));
  param_state.insert("exp_avg", at::full({4, 3}, 0.3f));
  dcpp::StateDict state_by_param;
  state_by_param.insert("0", param_state);
  dcpp::StateDict optim;
  optim.insert("state", state_by_param);
  optim.insert("mu_product", at::scalar_tensor(0.123456789, at::kDouble));  // NAdam's: 0-dim too
  dcpp::StateDict state;
  state.insert("model", model);
  state.insert("models", dcpp::StateDict());
  state.at("models").dict().insert("x", at::ones({2}));  // "model" must not match "models"
  state.insert("optim", optim);
  state.insert("ids", at::arange(4, at::kLong));
  state.insert("epoch", 3);
  return state;
}

std::map<std::string, at::Tensor> tensors_of(const fs::path& checkpoint) {
  auto source = dcpp::tools::open_checkpoint_source(checkpoint);
  std::map<std::string, at::Tensor> tensors;
  for (const auto& entry : source->entries()) {
    if (entry.is_tensor) tensors[entry.key] = source->read_tensor(entry);
  }
  return tensors;
}

std::vector<std::string> keys_of(const fs::path& checkpoint) {
  auto source = dcpp::tools::open_checkpoint_source(checkpoint);
  std::vector<std::string> keys;
  for (const auto& entry : source->entries()) {
    keys.push_back(entry.key);
  }
  std::sort(keys.begin(), keys.end());
  return keys;
}

}  // namespace

TEST_CASE("convert --dtype casts floating tensors but keeps 0-dim counters such as Adam's step") {
  dcpp::test::TempDir dir;
  dcpp::save(adam_like_state(), dir / "ckpt");
  const auto original = tensors_of(dir / "ckpt");
  for (const std::string to : {"dcp", "torch-save", "safetensors"}) {
    INFO(to);
    const fs::path out = dir / ("bf16-" + to);
    const auto cli = run_cli("convert " + (dir / "ckpt").string() + " " + out.string() + " --to " +
                             to + " --dtype bf16");
    INFO(cli.output);
    REQUIRE(cli.exit_code == 0);
    const auto converted = tensors_of(out);
    REQUIRE(converted.size() == original.size());
    for (const std::string key : {"optim.state.0.step", "optim.mu_product", "ids"}) {
      INFO(key);
      REQUIRE(dcpp::test::bitwise_equal(converted.at(key), original.at(key)));
    }
    REQUIRE(converted.at("optim.state.0.step").dim() == 0);
    REQUIRE(converted.at("optim.state.0.step").item<float>() == 550.0f);
    for (const std::string key : {"model.w", "model.b", "models.x", "optim.state.0.exp_avg"}) {
      INFO(key);
      REQUIRE(dcpp::test::bitwise_equal(converted.at(key), original.at(key).to(at::kBFloat16)));
    }
  }
}

TEST_CASE("convert --keys converts only the entries under the given FQN prefixes") {
  dcpp::test::TempDir dir;
  dcpp::save(adam_like_state(), dir / "ckpt");
  const std::string src = (dir / "ckpt").string();

  // "model" matches "model.w" and "model.b", not "models.x"; a prefix may be a whole key.
  auto cli = run_cli("convert " + src + " " + (dir / "model.pt").string() +
                     " --to torch-save --keys model");
  INFO(cli.output);
  REQUIRE(cli.exit_code == 0);
  REQUIRE_THAT(cli.output, Catch::Contains("converted 2 tensors"));
  REQUIRE(keys_of(dir / "model.pt") == std::vector<std::string>{"model.b", "model.w"});
  const auto original = tensors_of(dir / "ckpt");
  REQUIRE(dcpp::test::bitwise_equal(tensors_of(dir / "model.pt").at("model.w"),
                                    original.at("model.w")));

  cli = run_cli("convert " + src + " " + (dir / "some").string() +
                " --to dcp --keys model.w optim.state epoch");
  INFO(cli.output);
  REQUIRE(cli.exit_code == 0);
  REQUIRE(keys_of(dir / "some") == std::vector<std::string>{"epoch", "model.w",
                                                            "optim.state.0.exp_avg",
                                                            "optim.state.0.step"});

  // A prefix that matches nothing is an error naming it, and nothing is written.
  cli = run_cli("convert " + src + " " + (dir / "typo.safetensors").string() +
                " --to safetensors --keys model modle");
  REQUIRE(cli.exit_code == 1);
  REQUIRE_THAT(cli.output, Catch::Contains("'modle'"));
  REQUIRE(std::count(cli.output.begin(), cli.output.end(), '\n') == 1);
  REQUIRE_FALSE(fs::exists(dir / "typo.safetensors"));
  // "mod" is not a component of any key.
  cli = run_cli("convert " + src + " " + (dir / "partial").string() + " --to dcp --keys mod");
  REQUIRE(cli.exit_code == 1);
  REQUIRE_THAT(cli.output, Catch::Contains("'mod'"));
}
