// An optimizer state dict loads whichever layout saved it (optimizer_layout_match.h): a nested
// target from a flat checkpoint (what a pipeline stage saves) and a flat target from a nested one,
// and the optimizer it is set into equals the one saved, bit for bit.

#include "dcpp_test.h"

#include <dcpp/checkpoint/checkpointer.h>
#include <dcpp/state_dict/optimizer_layout.h>
#include <dcpp/state_dict/optimizer_state_dict.h>
#include <dcpp/state_dict/plain_layout.h>
#include <dcpp/state_dict/stateful_adapters.h>

#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/adam.h>

#include <sstream>

using dcpp::OptimizerLayout;
using dcpp::StateDict;
using dcpp::StateDictOptions;

namespace {

// A two-layer model and an Adam over it with a param group per layer, trained two steps.
struct Training {
  torch::nn::Sequential model;
  std::shared_ptr<dcpp::ModelLayout> layout;
  std::shared_ptr<torch::optim::Adam> adam;

  Training(uint64_t seed, double lr) {
    torch::manual_seed(seed);
    model = torch::nn::Sequential(torch::nn::Linear(4, 3), torch::nn::Linear(3, 2));
    layout = dcpp::plain_layout(*model);
    std::vector<torch::optim::OptimizerParamGroup> groups;
    for (int layer = 0; layer < 2; ++layer) {
      groups.emplace_back(model[layer]->parameters(),
                          std::make_unique<torch::optim::AdamOptions>(lr * (layer + 1)));
    }
    adam = std::make_shared<torch::optim::Adam>(std::move(groups));
    for (int step = 0; step < 2; ++step) {
      adam->zero_grad();
      model->forward(torch::randn({5, 4})).pow(2).sum().backward();
      adam->step();
    }
  }

  StateDict optimizer_state(bool flat) {
    return dcpp::get_optimizer_state_dict(
        *layout, *adam, StateDictOptions().with_flatten_optimizer_state_dict(flat));
  }
};

std::string text_of(const dcpp::StateValue& value) {
  std::ostringstream out;
  out << value.value();
  return out.str();
}

// Every state tensor bit for bit and every option equal, compared in the flat layout.
void require_same_optimizer(Training& resumed, Training& saved) {
  const StateDict got = resumed.optimizer_state(true), want = saved.optimizer_state(true);
  REQUIRE(got.size() == want.size());
  for (const auto& item : want) {
    INFO(item.key);
    const dcpp::StateValue* value = got.find(item.key);
    REQUIRE(value != nullptr);
    if (item.value.is_tensor()) {
      CHECK(dcpp::test::bitwise_equal(value->tensor(), item.value.tensor()));
    } else {
      CHECK(text_of(*value) == text_of(item.value));
    }
  }
}

void save_optimizer(Training& training, bool flat, const std::filesystem::path& directory) {
  StateDict state;
  state.insert("optim", training.optimizer_state(flat));
  dcpp::save(state, directory);
}

}  // namespace

TEST_CASE("a nested optimizer state dict loads from a flat checkpoint and back") {
  const dcpp::test::TempDir dir;
  Training saved(1, 0.01);
  save_optimizer(saved, /*flat=*/true, dir / "flat");
  save_optimizer(saved, /*flat=*/false, dir / "nested");

  for (const bool flat_target : {false, true}) {
    const char* checkpoint = flat_target ? "nested" : "flat";
    INFO((flat_target ? "a flat target from the nested checkpoint"
                      : "a nested target from the flat checkpoint"));
    Training resumed(2, 0.5);
    StateDict state;
    state.insert("optim", resumed.optimizer_state(flat_target));
    REQUIRE(dcpp::optimizer_layout_of(state.at("optim").dict()) ==
            (flat_target ? OptimizerLayout::kFlat : OptimizerLayout::kNested));
    dcpp::load(state, dir / checkpoint);
    CHECK(dcpp::optimizer_layout_of(state.at("optim").dict()) ==
          (flat_target ? OptimizerLayout::kNested : OptimizerLayout::kFlat));
    dcpp::set_optimizer_state_dict(*resumed.layout, *resumed.adam, state.at("optim").dict());
    require_same_optimizer(resumed, saved);
  }
}

TEST_CASE("optimizer_layout_of tells nested, flat and neither; flatten refuses a flat one") {
  Training training(3, 0.01);
  const StateDict nested = training.optimizer_state(false);
  const StateDict flat = training.optimizer_state(true);
  CHECK(dcpp::optimizer_layout_of(nested) == OptimizerLayout::kNested);
  CHECK(dcpp::optimizer_layout_of(flat) == OptimizerLayout::kFlat);
  StateDict model;
  model.insert("0.weight", at::zeros({1}));
  CHECK(dcpp::optimizer_layout_of(model) == OptimizerLayout::kNone);
  const StateDict flattened = dcpp::flatten_optimizer_state_dict(nested);
  REQUIRE(flattened.size() == flat.size());
  for (const auto& item : flat) CHECK(flattened.contains(item.key));
  std::string refusal;
  try {
    dcpp::flatten_optimizer_state_dict(flat);
  } catch (const dcpp::CheckpointError& error) {
    refusal = error.what();
    CHECK(error.kind() == dcpp::ErrorKind::kIncompatible);
  }
  CHECK_THAT(
      refusal,
      Catch::Matchers::StartsWith(
          "flatten_optimizer_state_dict: the state dict is flat, not a nested optimizer state dict "
          "({\"state\": {fqn: {...}}, \"param_groups\": [{..., \"params\": [fqn, ...]}]})"));
}

TEST_CASE("an app Stateful saved flat resumes one that asks for the nested layout, and back") {
  for (const bool saved_flat : {true, false}) {
    INFO((saved_flat ? "saved flat" : "saved nested"));
    const dcpp::test::TempDir dir;
    Training saved(4, 0.01);
    StateDict state;
    state.insert("app", dcpp::make_app_stateful(
                            saved.layout, saved.adam,
                            StateDictOptions().with_flatten_optimizer_state_dict(saved_flat)));
    dcpp::save(state, dir / "ckpt");

    Training resumed(5, 0.5);
    StateDict target;
    target.insert("app", dcpp::make_app_stateful(
                             resumed.layout, resumed.adam,
                             StateDictOptions().with_flatten_optimizer_state_dict(!saved_flat)));
    dcpp::load(target, dir / "ckpt");
    require_same_optimizer(resumed, saved);
    CHECK(dcpp::test::bitwise_equal(resumed.model[0]->parameters()[0],
                                    saved.model[0]->parameters()[0]));
  }
}

TEST_CASE("a param-group number no optimizer has is left to the planner, not parsed into a crash") {
  const dcpp::test::TempDir dir;
  StateDict groups;
  groups.insert("99999999999999999999", StateDict());
  groups.at("99999999999999999999").dict().insert("params", "0.weight");
  StateDict optim;
  optim.insert("param_groups", std::move(groups));
  StateDict saved;
  saved.insert("optim", std::move(optim));
  dcpp::save(saved, dir / "ckpt");

  StateDict flat;
  flat.insert("state.0.weight.exp_avg", at::zeros({2}));
  flat.insert("param_groups.0.weight.lr", 0.1);
  StateDict target;
  target.insert("optim", std::move(flat));
  try {
    dcpp::load(target, dir / "ckpt");
    FAIL("the load should have failed");
  } catch (const dcpp::CheckpointError& error) {
    CHECK(error.kind() == dcpp::ErrorKind::kIncompatible);
    CHECK_THAT(error.what(), Catch::Contains("optim.state.0.weight.exp_avg"));
  }
  CHECK(dcpp::optimizer_layout_of(target.at("optim").dict()) == OptimizerLayout::kFlat);
}
