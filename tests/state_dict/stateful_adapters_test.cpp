// The Stateful adapters (stateful_adapters.h) share what they read and write: the optimizer and a
// counter stay alive as long as an adapter over them does, and every adapter round-trips its
// state bit for bit through a save and a load.

#include "dcpp_test.h"

#include <dcpp/checkpoint/checkpointer.h>
#include <dcpp/state_dict/optimizer_state_dict.h>
#include <dcpp/state_dict/plain_layout.h>
#include <dcpp/state_dict/stateful_adapters.h>

#include <torch/nn/modules/linear.h>
#include <torch/optim/adam.h>

namespace {

void train_step(torch::nn::Linear& model, torch::optim::Optimizer& optimizer) {
  optimizer.zero_grad();
  model->forward(at::ones({2, 3})).sum().backward();
  optimizer.step();
}

}  // namespace

TEST_CASE("the adapters keep the optimizer and the counter they share alive") {
  dcpp::test::TempDir dir;
  torch::manual_seed(0);
  torch::nn::Linear model(3, 2);
  auto optimizer =
      std::make_shared<torch::optim::Adam>(model->parameters(), torch::optim::AdamOptions(0.1));
  train_step(model, *optimizer);
  const std::weak_ptr<torch::optim::Adam> optimizer_alive = optimizer;
  auto position = std::make_shared<int64_t>(41);
  const std::weak_ptr<int64_t> position_alive = position;

  dcpp::StateDict state;
  const auto layout = dcpp::plain_layout(*model);
  state.insert("app", dcpp::make_app_stateful(layout, optimizer));
  state.insert("optim", dcpp::make_optimizer_stateful(layout, optimizer));
  state.insert("loader", dcpp::make_counter_stateful(position));
  const dcpp::StateDict expected_optim = dcpp::get_optimizer_state_dict(*layout, *optimizer);
  optimizer.reset();  // the loop lets go first: the adapters still hold them
  position.reset();
  REQUIRE_FALSE(optimizer_alive.expired());
  REQUIRE_FALSE(position_alive.expired());
  dcpp::save(state, dir / "ckpt");

  *position_alive.lock() = 0;
  train_step(model, *optimizer_alive.lock());  // moves on: the load must bring it back
  dcpp::load(state, dir / "ckpt");
  CHECK(*position_alive.lock() == 41);
  const dcpp::StateDict loaded = dcpp::get_optimizer_state_dict(*layout, *optimizer_alive.lock());
  CHECK(dcpp::test::bitwise_equal(
      loaded.at("state").dict().at("weight").dict().at("exp_avg").tensor(),
      expected_optim.at("state").dict().at("weight").dict().at("exp_avg").tensor()));

  state = dcpp::StateDict();  // the last adapters go: so do what they shared
  CHECK(optimizer_alive.expired());
  CHECK(position_alive.expired());
}

TEST_CASE("an adapter over nothing is refused, naming the adapter") {
  const auto layout = dcpp::plain_layout(*torch::nn::Linear(2, 2));
  CHECK_THAT(dcpp::test::error_of([&] { dcpp::make_optimizer_stateful(layout, nullptr); }).what(),
             Catch::Contains("make_optimizer_stateful: the optimizer must not be null"));
  CHECK_THAT(dcpp::test::error_of([&] { dcpp::make_app_stateful(nullptr, nullptr); }).what(),
             Catch::Contains("make_app_stateful: the layout must not be null"));
  CHECK_THAT(dcpp::test::error_of([] { dcpp::make_counter_stateful(nullptr); }).what(),
             Catch::Contains("make_counter_stateful: the counter must not be null"));
}

// 0.1's overloads, which still work until 0.3.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
TEST_CASE("the adapters over references still work, deprecated") {
  dcpp::test::TempDir dir;
  torch::manual_seed(1);
  torch::nn::Linear model(3, 2);
  torch::optim::Adam optimizer(model->parameters(), torch::optim::AdamOptions(0.1));
  train_step(model, optimizer);
  int64_t position = 7;
  const auto layout = dcpp::plain_layout(*model);
  dcpp::StateDict state;
  state.insert("app", dcpp::make_app_state(layout, optimizer));
  state.insert("optim", dcpp::make_optimizer_stateful(layout, optimizer));
  state.insert("loader", dcpp::make_counter_stateful(position));
  dcpp::save(state, dir / "ckpt");
  position = 0;
  const dcpp::StateDict before = dcpp::get_optimizer_state_dict(*layout, optimizer);
  train_step(model, optimizer);
  dcpp::load(state, dir / "ckpt");
  CHECK(position == 7);
  const dcpp::StateDict after = dcpp::get_optimizer_state_dict(*layout, optimizer);
  CHECK(dcpp::test::bitwise_equal(
      after.at("state").dict().at("weight").dict().at("exp_avg_sq").tensor(),
      before.at("state").dict().at("weight").dict().at("exp_avg_sq").tensor()));
}
#pragma GCC diagnostic pop
