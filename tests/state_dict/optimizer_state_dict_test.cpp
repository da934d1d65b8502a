#include "training_helpers.h"

#include <dcpp/checkpoint/checkpointer.h>
#include <dcpp/core/checkpoint_error.h>
#include <dcpp/state_dict/model_optimizer_state_dict.h>
#include <dcpp/state_dict/optimizer_state_codec.h>
#include <dcpp/state_dict/plain_layout.h>
#include <dcpp/state_dict/stateful_adapters.h>

#include <torch/optim/adagrad.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/lbfgs.h>
#include <torch/optim/rmsprop.h>
#include <torch/optim/sgd.h>

#include <functional>
#include <memory>

using dcpp::StateDict;
using dcpp::StateDictOptions;
using dcpp::test::bitwise_equal;

namespace {

using OptimizerFactory =
    std::function<std::unique_ptr<torch::optim::Optimizer>(std::vector<at::Tensor>, double lr)>;

struct Case {
  std::string name;
  OptimizerFactory make;
  bool variable_length_state;  // LBFGS: its history lists change length; load without a target
};

std::vector<Case> all_optimizers() {
  using namespace torch::optim;
  return {
      {"SGD momentum nesterov",
       [](std::vector<at::Tensor> p, double lr) -> std::unique_ptr<Optimizer> {
         return std::make_unique<SGD>(
             p, SGDOptions(lr).momentum(0.9).nesterov(true).weight_decay(1e-3));
       },
       false},
      {"SGD plain",
       [](std::vector<at::Tensor> p, double lr) -> std::unique_ptr<Optimizer> {
         return std::make_unique<SGD>(p, SGDOptions(lr));
       },
       false},
      {"Adam",
       [](std::vector<at::Tensor> p, double lr) -> std::unique_ptr<Optimizer> {
         return std::make_unique<Adam>(
             p, AdamOptions(lr).betas(std::make_tuple(0.8, 0.95)).weight_decay(0.01));
       },
       false},
      {"Adam amsgrad",
       [](std::vector<at::Tensor> p, double lr) -> std::unique_ptr<Optimizer> {
         return std::make_unique<Adam>(p, AdamOptions(lr).amsgrad(true));
       },
       false},
      {"AdamW",
       [](std::vector<at::Tensor> p, double lr) -> std::unique_ptr<Optimizer> {
         return std::make_unique<AdamW>(p, AdamWOptions(lr).weight_decay(0.05));
       },
       false},
      {"Adagrad",
       [](std::vector<at::Tensor> p, double lr) -> std::unique_ptr<Optimizer> {
         return std::make_unique<Adagrad>(
             p, AdagradOptions(lr).lr_decay(0.01).initial_accumulator_value(0.1));
       },
       false},
      {"RMSprop centered momentum",
       [](std::vector<at::Tensor> p, double lr) -> std::unique_ptr<Optimizer> {
         return std::make_unique<RMSprop>(p, RMSpropOptions(lr).momentum(0.5).centered(true));
       },
       false},
      {"LBFGS",
       [](std::vector<at::Tensor> p, double lr) -> std::unique_ptr<Optimizer> {
         return std::make_unique<LBFGS>(p, LBFGSOptions(lr).max_iter(4).history_size(3));
       },
       true},
  };
}

std::vector<at::Tensor> parameters_of(torch::nn::Sequential& model) { return model->parameters(); }

}  // namespace

TEST_CASE("every libtorch optimizer resumes bit for bit: get, save, load, set, step") {
  const dcpp::test::Batch batch = dcpp::test::small_batch();
  for (const Case& c : all_optimizers()) {
    DYNAMIC_SECTION(c.name) {
      auto model_a = dcpp::test::small_model(1);
      auto optim_a = c.make(parameters_of(model_a), 0.05);
      for (int i = 0; i < 3; ++i) {
        dcpp::test::train_step(model_a, *optim_a, batch);
      }
      dcpp::test::TempDir dir;
      StateDict saved;
      saved.insert("app", dcpp::make_app_stateful(dcpp::plain_layout(*model_a),
                                                  dcpp::test::borrowed(*optim_a)));
      saved.insert("step", 3);
      dcpp::save(saved, dir.path());

      // Another initialisation and another learning rate: everything must come from the load.
      auto model_b = dcpp::test::small_model(2);
      auto optim_b = c.make(parameters_of(model_b), 0.5);
      auto layout_b = dcpp::plain_layout(*model_b);
      if (c.variable_length_state) {
        const StateDict everything = dcpp::load_from_keys(dir.path());
        const StateDict& app = everything.at("app").dict();
        dcpp::set_state_dict(*layout_b, *optim_b, app.at("model").dict(), app.at("optim").dict());
      } else {
        StateDict target;
        target.insert("app", dcpp::make_app_stateful(layout_b, dcpp::test::borrowed(*optim_b)));
        target.insert("step", 0);
        dcpp::load(target, dir.path());
      }
      REQUIRE(optim_b->param_groups()[0].options().get_lr() == 0.05);

      const float loss_a = dcpp::test::train_step(model_a, *optim_a, batch);
      const float loss_b = dcpp::test::train_step(model_b, *optim_b, batch);
      REQUIRE(loss_a == loss_b);
      for (const auto& item : model_a->named_parameters()) {
        INFO(item.key());
        REQUIRE(bitwise_equal(item.value(), model_b->named_parameters()[item.key()]));
      }
      const std::string difference = dcpp::test::first_difference(
          dcpp::get_optimizer_state_dict(*dcpp::plain_layout(*model_a), *optim_a),
          dcpp::get_optimizer_state_dict(*layout_b, *optim_b));
      REQUIRE(difference.empty());
    }
  }
}

TEST_CASE("Adam's state dict has Python's layout, names and types") {
  auto model = dcpp::test::small_model(1);
  torch::optim::Adam adam(model->parameters(),
                          torch::optim::AdamOptions(1e-2).betas(std::make_tuple(0.9, 0.99)));
  dcpp::test::train_step(model, adam, dcpp::test::small_batch());
  const auto layout = dcpp::plain_layout(*model);
  const StateDict sd = dcpp::get_optimizer_state_dict(*layout, adam);
  std::vector<std::string> fqns;
  for (const auto& item : sd.at("state").dict()) {
    fqns.push_back(item.key);
    std::vector<std::string> names;
    for (const auto& entry : item.value.dict()) {
      names.push_back(entry.key);
    }
    REQUIRE(names == std::vector<std::string>{"step", "exp_avg", "exp_avg_sq"});
    const at::Tensor step = item.value.dict().at("step").tensor();
    REQUIRE(step.dim() == 0);
    REQUIRE(step.scalar_type() == at::kFloat);
    REQUIRE(step.item<float>() == 1.0f);
  }
  REQUIRE(fqns == std::vector<std::string>{"0.weight", "0.bias", "2.weight", "2.bias"});
  // Shares storage with libtorch's state.
  auto& states = adam.state();
  const auto& first = static_cast<torch::optim::AdamParamState&>(
      *states.at(dcpp::compat::optimizer_state_key(states, model->parameters()[0])));
  REQUIRE(sd.at("state").dict().at("0.weight").dict().at("exp_avg").tensor().data_ptr() ==
          first.exp_avg().data_ptr());

  const auto& groups = sd.at("param_groups").list();
  REQUIRE(groups.size() == 1);
  std::vector<std::string> options;
  for (const auto& item : groups[0].dict()) {
    options.push_back(item.key);
  }
  REQUIRE(options == std::vector<std::string>{"lr", "betas", "eps", "weight_decay", "amsgrad",
                                              "maximize", "foreach", "capturable", "differentiable",
                                              "fused", "decoupled_weight_decay", "params"});
  const c10::IValue& betas = groups[0].dict().at("betas").value();
  REQUIRE(betas.isTuple());
  REQUIRE(betas.toTupleRef().elements()[1].toDouble() == 0.99);
  REQUIRE(groups[0].dict().at("foreach").value().isNone());
  const auto& params = groups[0].dict().at("params").list();
  REQUIRE(params.size() == 4);
  REQUIRE(params[3].value().toStringRef() == "2.bias");
}

TEST_CASE("flatten_optimizer_state_dict gives DCP's flat keys, and set reads them") {
  auto model = dcpp::test::small_model(1);
  torch::optim::AdamW adamw(model->parameters(), torch::optim::AdamWOptions(1e-2));
  const dcpp::test::Batch batch = dcpp::test::small_batch();
  dcpp::test::train_step(model, adamw, batch);
  const auto layout = dcpp::plain_layout(*model);
  const auto flat_options = StateDictOptions().with_flatten_optimizer_state_dict(true);
  const StateDict flat = dcpp::get_optimizer_state_dict(*layout, adamw, flat_options);
  REQUIRE(flat.contains("state.0.weight.exp_avg"));
  REQUIRE(flat.contains("state.2.bias.step"));
  REQUIRE(flat.contains("param_groups.0.weight.lr"));
  REQUIRE(flat.contains("param_groups.2.bias.betas"));
  REQUIRE_FALSE(flat.contains("state"));

  auto other = dcpp::test::small_model(1);
  torch::optim::AdamW other_adamw(other->parameters(), torch::optim::AdamWOptions(0.3));
  const auto other_layout = dcpp::plain_layout(*other);
  dcpp::set_optimizer_state_dict(*other_layout, other_adamw, flat);
  REQUIRE(other_adamw.param_groups()[0].options().get_lr() == 1e-2);
  REQUIRE(dcpp::test::first_difference(dcpp::get_optimizer_state_dict(*layout, adamw),
                                       dcpp::get_optimizer_state_dict(*other_layout, other_adamw))
              .empty());
}

TEST_CASE("lazily created state is created as DCP does: one zero-gradient step at lr 0") {
  auto model = dcpp::test::small_model(1);
  std::vector<at::Tensor> before;
  for (const auto& p : model->parameters()) {
    before.push_back(p.clone());
  }
  torch::optim::Adam adam(model->parameters(), torch::optim::AdamOptions(0.1));
  REQUIRE(adam.state().empty());
  const StateDict sd = dcpp::get_optimizer_state_dict(*dcpp::plain_layout(*model), adam);
  REQUIRE(adam.state().size() == 4);
  REQUIRE(sd.at("state").dict().at("0.weight").dict().at("step").tensor().item<float>() == 1.0f);
  REQUIRE(adam.param_groups()[0].options().get_lr() == 0.1);
  for (std::size_t i = 0; i < before.size(); ++i) {
    REQUIRE(bitwise_equal(model->parameters()[i], before[i]));
    REQUIRE_FALSE(model->parameters()[i].grad().defined());
  }
  // Not when a gradient exists (the state would not be created by a zero step).
  auto second = dcpp::test::small_model(1);
  torch::optim::Adam second_adam(second->parameters(), torch::optim::AdamOptions(0.1));
  second->parameters()[0].mutable_grad() = at::ones_like(second->parameters()[0]);
  dcpp::init_optimizer_state(second_adam);
  REQUIRE(second_adam.state().empty());
}

TEST_CASE("strict optimizer set lists missing and unexpected state and changes nothing") {
  auto model = dcpp::test::small_model(1);
  torch::optim::Adam adam(model->parameters(), torch::optim::AdamOptions(0.1));
  const auto layout = dcpp::plain_layout(*model);
  StateDict sd = dcpp::get_optimizer_state_dict(*layout, adam);
  sd.at("state").dict().erase("2.bias");
  sd.at("state").dict().insert("9.weight", sd.at("state").dict().at("0.bias").dict());
  sd.at("param_groups").list()[0].dict().insert_or_assign("lr", 7.0);
  REQUIRE_THROWS_WITH(dcpp::set_optimizer_state_dict(*layout, adam, sd),
                      Catch::Contains("'state.2.bias'") && Catch::Contains("'state.9.weight'") &&
                          Catch::Contains("Missing") && Catch::Contains("Unexpected"));
  REQUIRE(adam.param_groups()[0].options().get_lr() == 0.1);
  REQUIRE(adam.state().size() == 4);
  // Without strict the rest is applied, and the parameter without saved state has none.
  dcpp::set_optimizer_state_dict(*layout, adam, sd, StateDictOptions().with_strict(false));
  REQUIRE(adam.param_groups()[0].options().get_lr() == 7.0);
  REQUIRE(adam.state().size() == 3);
}

TEST_CASE("Python-only options are accepted when libtorch can honour them, refused otherwise") {
  auto model = dcpp::test::small_model(1);
  torch::optim::Adam adam(model->parameters(), torch::optim::AdamOptions(0.1));
  const auto layout = dcpp::plain_layout(*model);
  StateDict sd = dcpp::get_optimizer_state_dict(*layout, adam);
  StateDict& group = sd.at("param_groups").list()[0].dict();
  group.insert_or_assign("foreach", true);
  group.insert_or_assign("fused", false);
  group.insert_or_assign("initial_lr", 0.1);  // written by Python's LR schedulers
  group.insert_or_assign("weight_decay", 0);  // Python's default is the int 0
  dcpp::set_optimizer_state_dict(*layout, adam, sd);
  group.insert_or_assign("maximize", true);
  REQUIRE_THROWS_WITH(dcpp::set_optimizer_state_dict(*layout, adam, sd),
                      Catch::Contains("maximize=True") && Catch::Contains("'0.weight'"));
}

TEST_CASE("an optimizer over tensors outside the layout is refused, naming it") {
  auto model = dcpp::test::small_model(1);
  const at::Tensor stray = at::zeros({5}, at::TensorOptions().requires_grad(true));
  torch::optim::SGD sgd({model->parameters()[0], stray}, torch::optim::SGDOptions(0.1));
  REQUIRE_THROWS_WITH(
      dcpp::get_optimizer_state_dict(*dcpp::plain_layout(*model), sgd),
      Catch::Contains("parameter 1 of the optimizer's param group 0") && Catch::Contains("[5]"));
}

TEST_CASE("state of a sharded parameter is sharded like it") {
  const at::Tensor local = at::randn({3, 4}).requires_grad_(true);
  dcpp::test::ListedLayout layout({dcpp::test::piece("w", local, {6, 4}, {2, 0})});
  torch::optim::Adam adam({local}, torch::optim::AdamOptions(0.1));
  local.mutable_grad() = at::ones_like(local);
  adam.step();
  const StateDict sd = dcpp::get_optimizer_state_dict(layout, adam);
  const StateDict& state = sd.at("state").dict().at("w").dict();
  REQUIRE(state.at("step").is_tensor());
  const auto& exp_avg = state.at("exp_avg").sharded_tensor();
  REQUIRE(exp_avg.global_shape() == std::vector<int64_t>{6, 4});
  REQUIRE(exp_avg.local_shards()[0].offsets == std::vector<int64_t>{2, 0});

  // Set from whole tensors: the shard takes its rows.
  StateDict full = sd;
  const at::Tensor whole_avg = at::arange(24, at::kFloat).reshape({6, 4});
  full.at("state").dict().at("w").dict().insert_or_assign("exp_avg", whole_avg);
  full.at("state").dict().at("w").dict().insert_or_assign("exp_avg_sq", whole_avg * whole_avg);
  dcpp::set_optimizer_state_dict(layout, adam, full);
  auto& states = adam.state();
  const auto& live = static_cast<torch::optim::AdamParamState&>(
      *states.at(dcpp::compat::optimizer_state_key(states, local)));
  REQUIRE(bitwise_equal(live.exp_avg(), whole_avg.narrow(0, 2, 3)));
  REQUIRE(live.step() == 1);
}

// ---- The extension point: a user optimizer -------------------------------------------------

namespace {

struct SignSGDOptions : torch::optim::OptimizerCloneableOptions<SignSGDOptions> {
  explicit SignSGDOptions(double lr = 0.01) : lr_(lr) {}
  double get_lr() const override { return lr_; }
  void set_lr(const double lr) override { lr_ = lr; }
  double lr_;
};

struct SignSGDState : torch::optim::OptimizerCloneableParamState<SignSGDState> {
  int64_t updates = 0;
  at::Tensor last_sign;
};

// p -= lr * sign(grad); counts its updates.
class SignSGD : public torch::optim::Optimizer {
 public:
  SignSGD(std::vector<at::Tensor> params, double lr)
      : Optimizer({torch::optim::OptimizerParamGroup(std::move(params))},
                  std::make_unique<SignSGDOptions>(lr)) {}
  at::Tensor step(LossClosure closure) override {
    at::Tensor loss = closure ? closure() : at::Tensor();
    at::NoGradGuard no_grad;
    for (auto& group : param_groups()) {
      const double lr = group.options().get_lr();
      for (auto& p : group.params()) {
        if (!p.grad().defined()) {
          continue;
        }
        auto& slot = state()[dcpp::compat::optimizer_state_key(state(), p)];
        if (!slot) {
          slot = std::make_unique<SignSGDState>();
        }
        auto& s = static_cast<SignSGDState&>(*slot);
        s.last_sign = p.grad().sign();
        s.updates += 1;
        p.sub_(s.last_sign, lr);
      }
    }
    return loss;
  }
};

class SignSGDCodec : public dcpp::OptimizerStateCodec {
 public:
  std::string name() const override { return "SignSGD"; }
  StateDict encode_state(const torch::optim::OptimizerParamState& base) const override {
    const auto& s = static_cast<const SignSGDState&>(base);
    StateDict out;
    out.insert("updates", s.updates);
    out.insert("last_sign", s.last_sign);
    return out;
  }
  std::unique_ptr<torch::optim::OptimizerParamState> decode_state(
      const StateDict& in, const at::Tensor& /*param*/) const override {
    auto s = std::make_unique<SignSGDState>();
    s->updates = dcpp::state_int(dcpp::required(in, "updates"), "updates");
    s->last_sign = dcpp::state_tensor(dcpp::required(in, "last_sign"), "last_sign");
    return s;
  }
  StateDict encode_options(const torch::optim::OptimizerOptions& options) const override {
    StateDict out;
    out.insert("lr", options.get_lr());
    return out;
  }
  void decode_options(const StateDict& saved,
                      torch::optim::OptimizerOptions& options) const override {
    if (const auto* lr = saved.find("lr")) {
      options.set_lr(dcpp::state_number(*lr, "lr"));
    }
  }
};

}  // namespace

TEST_CASE("a user optimizer takes part through a registered codec") {
  const dcpp::test::Batch batch = dcpp::test::small_batch();
  auto model = dcpp::test::small_model(1);
  SignSGD optimizer(model->parameters(), 0.01);
  const auto layout = dcpp::plain_layout(*model);
  REQUIRE_THROWS_WITH(dcpp::get_optimizer_state_dict(*layout, optimizer),
                      Catch::Contains("no optimizer state codec") &&
                          Catch::Contains("register_optimizer_state_codec"));
  dcpp::register_optimizer_state_codec<SignSGD>(std::make_shared<SignSGDCodec>());
  dcpp::test::train_step(model, optimizer, batch);
  dcpp::test::train_step(model, optimizer, batch);

  dcpp::test::TempDir dir;
  StateDict saved;
  saved.insert("app", dcpp::make_app_stateful(layout, dcpp::test::borrowed(optimizer)));
  dcpp::save(saved, dir.path());
  auto other = dcpp::test::small_model(2);
  SignSGD other_optimizer(other->parameters(), 0.5);
  StateDict target;
  target.insert("app", dcpp::make_app_stateful(dcpp::plain_layout(*other),
                                               dcpp::test::borrowed(other_optimizer)));
  dcpp::load(target, dir.path());
  REQUIRE(other_optimizer.param_groups()[0].options().get_lr() == 0.01);
  auto& states = other_optimizer.state();
  REQUIRE(static_cast<SignSGDState&>(
              *states.at(dcpp::compat::optimizer_state_key(states, other->parameters()[0])))
              .updates == 2);
  dcpp::test::train_step(model, optimizer, batch);
  dcpp::test::train_step(other, other_optimizer, batch);
  for (const auto& item : model->named_parameters()) {
    REQUIRE(bitwise_equal(item.value(), other->named_parameters()[item.key()]));
  }
}
