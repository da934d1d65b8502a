// Loading an optimizer checkpoint into an optimizer made with other options: what the restored
// options need (SGD's momentum buffers, Adam's amsgrad maximum, RMSprop's momentum and centered
// averages) is restored with them, or the load is refused; never the options without their state.

#include "training_helpers.h"

#include <dcpp/checkpoint/checkpointer.h>
#include <dcpp/core/torch_compat.h>
#include <dcpp/state_dict/optimizer_state_dict.h>
#include <dcpp/state_dict/plain_layout.h>
#include <dcpp/state_dict/stateful_adapters.h>

#include <torch/optim/adam.h>
#include <torch/optim/rmsprop.h>
#include <torch/optim/sgd.h>

namespace fs = std::filesystem;
using dcpp::test::small_batch;
using dcpp::test::small_model;
using dcpp::test::TempDir;
using dcpp::test::train_step;

namespace {

// Saves `optimizer` (of `model`, trained two steps) as {"optim": ...} into `dir`.
void save_trained(torch::nn::Sequential& model, torch::optim::Optimizer& optimizer,
                  const fs::path& dir) {
  const auto batch = small_batch();
  train_step(model, optimizer, batch);
  train_step(model, optimizer, batch);
  dcpp::StateDict state;
  state.insert("optim", dcpp::make_optimizer_stateful(dcpp::plain_layout(*model),
                                                      dcpp::test::borrowed(optimizer)));
  dcpp::save(state, dir);
}

// Loads {"optim": ...} from `dir` into `optimizer` (of `model`) as a training job resumes.
void load_into(torch::nn::Sequential& model, torch::optim::Optimizer& optimizer,
               const fs::path& dir) {
  dcpp::StateDict state;
  state.insert("optim", dcpp::make_optimizer_stateful(dcpp::plain_layout(*model),
                                                      dcpp::test::borrowed(optimizer)));
  dcpp::load(state, dir);
}

}  // namespace

TEST_CASE("an SGD checkpoint with momentum loaded into an SGD without is refused, naming why") {
  TempDir dir;
  auto saved_model = small_model(1);
  torch::optim::SGD saved(saved_model->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  save_trained(saved_model, saved, dir.path());

  auto model = small_model(1);
  torch::optim::SGD plain(model->parameters(), torch::optim::SGDOptions(0.5));
  REQUIRE_THROWS_WITH(load_into(model, plain, dir.path()),
                      Catch::Contains("momentum_buffer") && Catch::Contains("momentum 0.9") &&
                          Catch::Contains("make the optimizer with the saved options"));
  // Nothing changed: not the options either.
  const auto& options =
      static_cast<const torch::optim::SGDOptions&>(plain.param_groups()[0].options());
  CHECK(options.momentum() == 0);
  CHECK(options.lr() == 0.5);

  // Made with the saved momentum: options and buffers restored, bit for bit.
  torch::optim::SGD with_momentum(model->parameters(), torch::optim::SGDOptions(0.5).momentum(0.9));
  load_into(model, with_momentum, dir.path());
  CHECK(static_cast<const torch::optim::SGDOptions&>(with_momentum.param_groups()[0].options())
            .lr() == 0.1);
  const auto& saved_params = saved.param_groups()[0].params();
  const auto& loaded_params = with_momentum.param_groups()[0].params();
  REQUIRE(saved_params.size() == loaded_params.size());
  for (std::size_t i = 0; i < saved_params.size(); ++i) {
    const auto& a = static_cast<const torch::optim::SGDParamState&>(
        *saved.state().at(dcpp::compat::optimizer_state_key(saved.state(), saved_params[i])));
    const auto& b = static_cast<const torch::optim::SGDParamState&>(*with_momentum.state().at(
        dcpp::compat::optimizer_state_key(with_momentum.state(), loaded_params[i])));
    CHECK(dcpp::test::bitwise_equal(a.momentum_buffer(), b.momentum_buffer()));
  }
}

TEST_CASE("the whole SGD state dict with momentum restores the buffers into an SGD without") {
  TempDir dir;
  auto saved_model = small_model(1);
  torch::optim::SGD saved(saved_model->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  save_trained(saved_model, saved, dir.path());
  // Everything the checkpoint holds (not a target's keys): the options and their state.
  const dcpp::StateDict everything = dcpp::load_from_keys(dir.path(), {"optim"});
  auto model = small_model(1);
  torch::optim::SGD plain(model->parameters(), torch::optim::SGDOptions(0.5));
  dcpp::set_optimizer_state_dict(*dcpp::plain_layout(*model), plain, everything.at("optim").dict());
  CHECK(
      static_cast<const torch::optim::SGDOptions&>(plain.param_groups()[0].options()).momentum() ==
      0.9);
  CHECK(plain.state().size() == saved.state().size());
}

TEST_CASE("Adam with amsgrad and RMSprop centered with momentum refuse a target without them") {
  TempDir adam_dir, rmsprop_dir;
  {
    auto model = small_model(1);
    torch::optim::Adam adam(model->parameters(), torch::optim::AdamOptions(0.01).amsgrad(true));
    save_trained(model, adam, adam_dir.path());
    torch::optim::RMSprop rmsprop(model->parameters(),
                                  torch::optim::RMSpropOptions(0.01).momentum(0.5).centered(true));
    save_trained(model, rmsprop, rmsprop_dir.path());
  }
  auto model = small_model(1);
  torch::optim::Adam adam(model->parameters(), torch::optim::AdamOptions(0.01));
  REQUIRE_THROWS_WITH(load_into(model, adam, adam_dir.path()),
                      Catch::Contains("max_exp_avg_sq") && Catch::Contains("amsgrad true"));
  torch::optim::RMSprop rmsprop(model->parameters(), torch::optim::RMSpropOptions(0.01));
  REQUIRE_THROWS_WITH(load_into(model, rmsprop, rmsprop_dir.path()),
                      Catch::Contains("momentum_buffer") && Catch::Contains("grad_avg"));
  // Made alike, both load.
  torch::optim::Adam amsgrad(model->parameters(), torch::optim::AdamOptions(0.01).amsgrad(true));
  load_into(model, amsgrad, adam_dir.path());
  torch::optim::RMSprop centered(model->parameters(),
                                 torch::optim::RMSpropOptions(0.01).momentum(0.5).centered(true));
  load_into(model, centered, rmsprop_dir.path());
}
