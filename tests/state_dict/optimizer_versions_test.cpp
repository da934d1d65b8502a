// Param-group keys across PyTorch versions: what dcpp writes carries every key of PyTorch 2.6 to
// 2.14's optimizers (so each version's strict dcp.load finds them), what each version wrote loads
// back (keys a version lacks are optional), and the flags libtorch cannot honour are refused.

#include "training_helpers.h"

#include <dcpp/checkpoint/checkpointer.h>
#include <dcpp/core/checkpoint_error.h>
#include <dcpp/state_dict/model_state_dict.h>
#include <dcpp/state_dict/optimizer_state_dict.h>
#include <dcpp/state_dict/plain_layout.h>
#include <dcpp/state_dict/stateful_adapters.h>

#include <torch/optim/adagrad.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/lbfgs.h>
#include <torch/optim/rmsprop.h>
#include <torch/optim/sgd.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <set>

using dcpp::StateDict;
using dcpp::StateDictOptions;

namespace {

using torch::optim::Optimizer;

struct Versions {
  std::string name;
  std::function<std::unique_ptr<Optimizer>(std::vector<at::Tensor>)> make;
  // Each version's param-group keys in its order (`optimizer.param_groups[0]` less "params"),
  // read from torch/optim/*.py of Debian's PyTorch 2.6.0 and 2.14.1.
  std::vector<std::string> pytorch_2_6;
  std::vector<std::string> pytorch_2_14;
};

std::vector<Versions> versioned_optimizers() {
  using namespace torch::optim;
  const std::vector<std::string> adam_2_6 = {
      "lr",       "betas",   "eps",        "weight_decay",   "amsgrad",
      "maximize", "foreach", "capturable", "differentiable", "fused"};
  const std::vector<std::string> adam_2_14 = {"lr",
                                              "betas",
                                              "eps",
                                              "weight_decay",
                                              "amsgrad",
                                              "maximize",
                                              "foreach",
                                              "capturable",
                                              "differentiable",
                                              "fused",
                                              "decoupled_weight_decay"};
  const std::vector<std::string> adamw_2_6 = {
      "lr",      "betas",    "eps",        "weight_decay",   "amsgrad",
      "foreach", "maximize", "capturable", "differentiable", "fused"};
  const std::vector<std::string> sgd = {"lr",           "momentum",       "dampening",
                                        "weight_decay", "nesterov",       "maximize",
                                        "foreach",      "differentiable", "fused"};
  const std::vector<std::string> adagrad = {
      "lr",       "lr_decay",       "eps",  "weight_decay", "initial_accumulator_value", "foreach",
      "maximize", "differentiable", "fused"};
  const std::vector<std::string> rmsprop = {"lr",       "momentum",      "alpha",      "eps",
                                            "centered", "weight_decay",  "capturable", "foreach",
                                            "maximize", "differentiable"};
  const std::vector<std::string> lbfgs_2_6 = {
      "lr",           "max_iter",      "max_eval", "tolerance_grad", "tolerance_change",
      "history_size", "line_search_fn"};
  std::vector<std::string> lbfgs_2_14 = lbfgs_2_6;
  lbfgs_2_14.push_back("maximize");
  return {
      {"SGD",
       [](auto p) -> std::unique_ptr<Optimizer> {
         return std::make_unique<SGD>(p, SGDOptions(0.1).momentum(0.9));
       },
       sgd, sgd},
      {"Adam",
       [](auto p) -> std::unique_ptr<Optimizer> {
         return std::make_unique<Adam>(p, AdamOptions(0.1));
       },
       adam_2_6, adam_2_14},
      {"AdamW",
       [](auto p) -> std::unique_ptr<Optimizer> {
         return std::make_unique<AdamW>(p, AdamWOptions(0.1));
       },
       adamw_2_6, adam_2_14},  // 2.14's AdamW is an Adam: Adam's keys and order
      {"Adagrad",
       [](auto p) -> std::unique_ptr<Optimizer> {
         return std::make_unique<Adagrad>(p, AdagradOptions(0.1));
       },
       adagrad, adagrad},
      {"RMSprop",
       [](auto p) -> std::unique_ptr<Optimizer> {
         return std::make_unique<RMSprop>(p, RMSpropOptions(0.1));
       },
       rmsprop, rmsprop},
      {"LBFGS",
       [](auto p) -> std::unique_ptr<Optimizer> {
         return std::make_unique<LBFGS>(p, LBFGSOptions(0.1));
       },
       lbfgs_2_6, lbfgs_2_14},
  };
}

std::vector<std::string> option_keys_of(const StateDict& group) {
  std::vector<std::string> keys;
  for (const auto& item : group) {
    if (item.key != "params") {
      keys.push_back(item.key);
    }
  }
  return keys;
}

StateDict& first_group(StateDict& optim_sd) { return optim_sd.at("param_groups").list()[0].dict(); }

// A checkpoint of `optimizer` as PyTorch 2.6 would hold it: without the keys 2.6 lacks.
void save_without(torch::nn::Sequential& model, Optimizer& optimizer,
                  const std::vector<std::string>& dropped, const std::filesystem::path& dir) {
  StateDict optim_sd = dcpp::get_optimizer_state_dict(*dcpp::plain_layout(*model), optimizer);
  for (const std::string& key : dropped) {
    REQUIRE(first_group(optim_sd).erase(key));
  }
  StateDict state;
  state.insert("optim", optim_sd);
  dcpp::save(state, dir);
}

StateDict optimizer_target(torch::nn::Sequential& model, Optimizer& optimizer) {
  StateDict state;
  state.insert("optim", dcpp::make_optimizer_stateful(dcpp::plain_layout(*model),
                                                      dcpp::test::borrowed(optimizer)));
  return state;
}

}  // namespace

TEST_CASE("each optimizer's param group carries the keys of every PyTorch from 2.6 to 2.14") {
  for (const Versions& v : versioned_optimizers()) {
    DYNAMIC_SECTION(v.name) {
      auto model = dcpp::test::small_model(1);
      auto optimizer = v.make(model->parameters());
      StateDict sd = dcpp::get_optimizer_state_dict(*dcpp::plain_layout(*model), *optimizer);
      const std::vector<std::string> written = option_keys_of(first_group(sd));
      // The newest's keys in the newest's order, then any key only an older version has (none).
      REQUIRE(written == v.pytorch_2_14);
      for (const std::string& key : v.pytorch_2_6) {
        INFO(key);
        REQUIRE(std::count(written.begin(), written.end(), key) == 1);
      }
    }
  }
}

TEST_CASE("the newer keys hold what libtorch does: Adam false, AdamW true, LBFGS no maximize") {
  auto model = dcpp::test::small_model(1);
  const auto layout = dcpp::plain_layout(*model);
  torch::optim::Adam adam(model->parameters(), torch::optim::AdamOptions(0.1));
  torch::optim::AdamW adamw(model->parameters(), torch::optim::AdamWOptions(0.1));
  torch::optim::LBFGS lbfgs(model->parameters(), torch::optim::LBFGSOptions(0.1));
  StateDict adam_sd = dcpp::get_optimizer_state_dict(*layout, adam);
  StateDict adamw_sd = dcpp::get_optimizer_state_dict(*layout, adamw);
  StateDict lbfgs_sd = dcpp::get_optimizer_state_dict(*layout, lbfgs);
  REQUIRE(first_group(adam_sd).at("decoupled_weight_decay").value().toBool() == false);
  REQUIRE(first_group(adamw_sd).at("decoupled_weight_decay").value().toBool() == true);
  REQUIRE(first_group(lbfgs_sd).at("maximize").value().toBool() == false);
  // The flat layout repeats them per parameter.
  const StateDict flat = dcpp::get_optimizer_state_dict(
      *layout, adamw, StateDictOptions().with_flatten_optimizer_state_dict(true));
  REQUIRE(flat.at("param_groups.2.bias.decoupled_weight_decay").value().toBool() == true);
}

TEST_CASE("decoupled_weight_decay=True is AdamW's rule: AdamW takes it, Adam refuses it") {
  auto model = dcpp::test::small_model(1);
  const auto layout = dcpp::plain_layout(*model);
  torch::optim::Adam adam(model->parameters(), torch::optim::AdamOptions(0.1));
  torch::optim::AdamW adamw(model->parameters(), torch::optim::AdamWOptions(0.1));
  StateDict sd = dcpp::get_optimizer_state_dict(*layout, adam);
  first_group(sd).insert_or_assign("lr", 0.02);

  // PyTorch 2.14's Adam(decoupled_weight_decay=True) (or AdamW).
  first_group(sd).insert_or_assign("decoupled_weight_decay", true);
  dcpp::set_optimizer_state_dict(*layout, adamw, sd);
  REQUIRE(adamw.param_groups()[0].options().get_lr() == 0.02);
  REQUIRE_THROWS_AS(dcpp::set_optimizer_state_dict(*layout, adam, sd), dcpp::CheckpointError);
  REQUIRE_THROWS_WITH(dcpp::set_optimizer_state_dict(*layout, adam, sd),
                      Catch::Contains("decoupled_weight_decay=True") &&
                          Catch::Contains("use torch::optim::AdamW") &&
                          Catch::Contains("'0.weight'"));
  REQUIRE(adam.param_groups()[0].options().get_lr() == 0.1);  // nothing changed

  // False (2.14's Adam) is Adam's rule; AdamW takes it too, as Python's AdamW does (its
  // __setstate__ sets decoupled_weight_decay back to True for any state loaded into it).
  first_group(sd).insert_or_assign("decoupled_weight_decay", false);
  dcpp::set_optimizer_state_dict(*layout, adam, sd);
  REQUIRE(adam.param_groups()[0].options().get_lr() == 0.02);
  dcpp::set_optimizer_state_dict(*layout, adamw, sd);
  // Absent (PyTorch 2.6) is either.
  first_group(sd).erase("decoupled_weight_decay");
  dcpp::set_optimizer_state_dict(*layout, adam, sd);
  dcpp::set_optimizer_state_dict(*layout, adamw, sd);
}

TEST_CASE("LBFGS accepts maximize=False (PyTorch 2.14) and refuses maximize=True") {
  auto model = dcpp::test::small_model(1);
  const auto layout = dcpp::plain_layout(*model);
  torch::optim::LBFGS lbfgs(model->parameters(), torch::optim::LBFGSOptions(0.1));
  StateDict sd = dcpp::get_optimizer_state_dict(*layout, lbfgs);
  first_group(sd).insert_or_assign("lr", 0.03);
  dcpp::set_optimizer_state_dict(*layout, lbfgs, sd);
  REQUIRE(lbfgs.param_groups()[0].options().get_lr() == 0.03);
  first_group(sd).insert_or_assign("maximize", true);
  REQUIRE_THROWS_WITH(dcpp::set_optimizer_state_dict(*layout, lbfgs, sd),
                      Catch::Contains("maximize=True") && Catch::Contains("LBFGS"));
}

TEST_CASE(
    "a checkpoint without the newer keys (PyTorch 2.6's) loads strictly through the adapters") {
  const std::vector<std::pair<std::string, std::vector<std::string>>> cases = {
      {"Adam", {"decoupled_weight_decay"}},
      {"AdamW", {"decoupled_weight_decay"}},
      {"LBFGS", {"maximize"}}};
  for (const auto& [name, dropped] : cases) {
    DYNAMIC_SECTION(name) {
      const auto all = versioned_optimizers();
      const std::string& wanted = name;  // C++17 lambdas capture no structured binding
      const auto& v = *std::find_if(all.begin(), all.end(),
                                    [&](const Versions& o) { return o.name == wanted; });
      auto model = dcpp::test::small_model(1);
      auto saved = v.make(model->parameters());
      saved->param_groups()[0].options().set_lr(0.04);
      dcpp::test::TempDir dir;
      save_without(model, *saved, dropped, dir.path());

      auto other = dcpp::test::small_model(2);
      auto loaded = v.make(other->parameters());
      StateDict target = optimizer_target(other, *loaded);
      const dcpp::IncompatibleKeys report = dcpp::load(target, dir.path());
      REQUIRE(report.missing_keys.empty());
      REQUIRE(loaded->param_groups()[0].options().get_lr() == 0.04);
      // The same through the app state, and in the flat layout.
      auto app_target_model = dcpp::test::small_model(3);
      auto app_loaded = v.make(app_target_model->parameters());
      StateDict app;
      app.insert("app", dcpp::make_app_stateful(dcpp::plain_layout(*app_target_model),
                                                dcpp::test::borrowed(*app_loaded)));
      dcpp::test::TempDir app_dir;
      {
        StateDict optim_sd = dcpp::get_optimizer_state_dict(*dcpp::plain_layout(*model), *saved);
        for (const std::string& key : dropped) {
          first_group(optim_sd).erase(key);
        }
        StateDict inner;
        inner.insert("model", dcpp::get_model_state_dict(*model));
        inner.insert("optim", optim_sd);
        StateDict outer;
        outer.insert("app", inner);
        dcpp::save(outer, app_dir.path());
      }
      dcpp::load(app, app_dir.path());
      REQUIRE(app_loaded->param_groups()[0].options().get_lr() == 0.04);
    }
  }
}

TEST_CASE("an AdamW checkpoint loaded into libtorch's Adam through the adapters is refused") {
  auto model = dcpp::test::small_model(1);
  torch::optim::AdamW adamw(model->parameters(), torch::optim::AdamWOptions(0.1));
  dcpp::test::TempDir dir;
  dcpp::save(optimizer_target(model, adamw), dir.path());

  auto other = dcpp::test::small_model(2);
  torch::optim::Adam adam(other->parameters(), torch::optim::AdamOptions(0.5));
  StateDict target = optimizer_target(other, adam);
  REQUIRE_THROWS_WITH(
      dcpp::load(target, dir.path()),
      Catch::Contains("decoupled_weight_decay=True") && Catch::Contains("use torch::optim::AdamW"));
  REQUIRE(adam.param_groups()[0].options().get_lr() == 0.5);
  // The flat layout too.
  const auto flat = StateDictOptions().with_flatten_optimizer_state_dict(true);
  dcpp::test::TempDir flat_dir;
  StateDict flat_saved;
  flat_saved.insert("optim", dcpp::make_optimizer_stateful(dcpp::plain_layout(*model),
                                                           dcpp::test::borrowed(adamw), flat));
  dcpp::save(flat_saved, flat_dir.path());
  StateDict flat_target;
  flat_target.insert("optim", dcpp::make_optimizer_stateful(dcpp::plain_layout(*other),
                                                            dcpp::test::borrowed(adam), flat));
  REQUIRE_THROWS_WITH(dcpp::load(flat_target, flat_dir.path()),
                      Catch::Contains("decoupled_weight_decay=True"));
}
