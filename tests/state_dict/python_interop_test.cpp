// Resuming Python training in libtorch (PyTorch's model_optim_adam fixtures) and writing a
// libtorch model and Adam for Python to resume (tests/interop/check_dcpp_model_optim.py).

#include "dcpp_test.h"
#include "python_model.h"

#include <dcpp/checkpoint/checkpointer.h>
#include <dcpp/state_dict/model_optimizer_state_dict.h>
#include <dcpp/state_dict/plain_layout.h>
#include <dcpp/state_dict/stateful_adapters.h>

#include <torch/nn/functional/loss.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/adam.h>
#include <nlohmann/json.hpp>

#include <fstream>

using dcpp::StateDict;
using dcpp::test::interop_output_dir;
using nlohmann::json;

using dcpp::test::python_model;

namespace {

json manifest(const std::string& name, const std::string& version = "2.6") {
  std::ifstream in(dcpp::test::fixture(name + ".manifest.json", version));
  return json::parse(in);
}

float step(torch::nn::Sequential& model, torch::optim::Adam& adam, const at::Tensor& x,
           const at::Tensor& y) {
  adam.zero_grad();
  at::Tensor loss = torch::nn::functional::mse_loss(model->forward(x), y);
  const float value = loss.item<float>();
  loss.backward();
  adam.step();
  return value;
}

// Restores the fixture into a fresh model and Adam (other initialisation, other options) through
// the Stateful adapters, and returns the losses of the next two steps.
std::vector<float> resume_fixture(const std::string& name, const std::string& version = "2.6") {
  auto model = python_model(4321);
  torch::optim::Adam adam(model->parameters(), torch::optim::AdamOptions(0.5));
  const auto layout = dcpp::plain_layout(*model);
  StateDict state;
  state.insert("model", dcpp::make_model_stateful(layout));
  state.insert("optim", dcpp::make_optimizer_stateful(layout, dcpp::test::borrowed(adam)));
  state.insert("x", at::zeros({16, 4}));
  state.insert("y", at::zeros({16, 2}));
  dcpp::load(state, dcpp::test::fixture(name, version));

  const auto& options = static_cast<torch::optim::AdamOptions&>(adam.param_groups()[0].options());
  REQUIRE(options.lr() == 0.01);
  REQUIRE(std::get<1>(options.betas()) == 0.99);
  REQUIRE(options.weight_decay() == 0.01);
  std::vector<float> losses;
  for (int i = 0; i < 2; ++i) {
    losses.push_back(step(model, adam, state.at("x").tensor(), state.at("y").tensor()));
  }
  return losses;
}

}  // namespace

TEST_CASE("Python's Adam training resumes in libtorch with the recorded next losses") {
  // model_optim_adam_resume: the same training run as model_optim_adam, saved before the
  // next-loss computation could touch the optimizer's state (tests/interop/
  // make_model_optim_adam_resume.py); its next_losses equal model_optim_adam's.
  const json expected = manifest("model_optim_adam_resume")["next_losses"];
  const std::vector<float> losses = resume_fixture("model_optim_adam_resume");
  for (std::size_t i = 0; i < 2; ++i) {
    INFO("step " << i << ": " << losses[i] << " vs " << expected[i].get<double>());
    REQUIRE(std::abs(losses[i] - expected[i].get<double>()) < 1e-5);
  }
}

TEST_CASE(
    "model_optim_adam as written: the first loss matches, the second matches Python's resume") {
  // The fixture's optimizer state was shared with the optimizer that computed next_losses and was
  // saved after it had stepped twice more (step = 5 while the model is at step 3), so no resume
  // (Python's included) reproduces next_losses[1]. What Python's own set_state_dict resume of
  // this checkpoint gives (docs/interop.md): 0.7479823231697083, 0.7300286889076233.
  const json expected = manifest("model_optim_adam")["next_losses"];
  const std::vector<float> losses = resume_fixture("model_optim_adam");
  REQUIRE(std::abs(losses[0] - expected[0].get<double>()) < 1e-5);
  REQUIRE(std::abs(losses[1] - 0.7300286889076233) < 1e-5);
}

TEST_CASE("PyTorch 2.14's Adam (decoupled_weight_decay=False) resumes in libtorch's Adam") {
  // tests/fixtures/pytorch-2.14/model_optim_adam: the same run as 2.6's, saved with step 3 (2.14's
  // load_state_dict copies the state, so the next-loss computation did not touch it); its param
  // group has decoupled_weight_decay, which 2.6's lacks.
  const json fixture = manifest("model_optim_adam", "2.14");
  const json& group =
      fixture["state_dict"]["items"]["optim"]["items"]["param_groups"]["items"][0]["items"];
  REQUIRE(group["decoupled_weight_decay"]["value"] == false);
  const json expected = fixture["next_losses"];
  const std::vector<float> losses = resume_fixture("model_optim_adam", "2.14");
  for (std::size_t i = 0; i < 2; ++i) {
    INFO("step " << i << ": " << losses[i] << " vs " << expected[i].get<double>());
    REQUIRE(std::abs(losses[i] - expected[i].get<double>()) < 1e-5);
  }
}

TEST_CASE("write a libtorch model and Adam for Python to resume", "[.interop]") {
  const std::filesystem::path dir = dcpp::test::interop_output_dir("state-dict-interop");
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  auto model = python_model(0);
  torch::optim::Adam adam(
      model->parameters(),
      torch::optim::AdamOptions(1e-2).betas(std::make_tuple(0.9, 0.99)).weight_decay(0.01));
  torch::manual_seed(7);
  const at::Tensor x = torch::randn({16, 4});
  const at::Tensor y = torch::randn({16, 2});
  for (int i = 0; i < 3; ++i) {
    step(model, adam, x, y);
  }
  auto [model_sd, optim_sd] = dcpp::get_state_dict(*dcpp::plain_layout(*model), adam);
  StateDict state;
  state.insert("model", model_sd);
  state.insert("optim", optim_sd);
  state.insert("x", x);
  state.insert("y", y);
  dcpp::save(state, dir / "checkpoint");
  json out;
  out["next_losses"] = json::array();
  for (int i = 0; i < 2; ++i) {
    out["next_losses"].push_back(step(model, adam, x, y));
  }
  std::ofstream(dir / "expected.json") << out.dump(1);
}
