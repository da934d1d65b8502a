// Every libtorch optimizer, both ways with Python's (tests/interop/optimizers.py, run against
// PyTorch 2.6 and the newest by tests/interop/optimizers.sh). Hidden tests, run by that script:
//   [.optimizer_interop_write]  trains each optimizer 3 steps and saves {model, optim, x, y} with
//                               get_state_dict into interop_output_dir("optimizer-interop")/<case>,
//                               with the next 2 losses and the param group dcpp wrote
//   [.optimizer_interop_read]   resumes what Python wrote into $DCPP_INTEROP_IN/<case> through
//                               make_optimizer_stateful (a strict load) and checks every option
//                               Python saved and the next 2 losses; each loss compared is
//                               appended to $DCPP_INTEROP_IN/resumed.txt

#include "dcpp_test.h"
#include "python_model.h"

#include <dcpp/checkpoint/checkpointer.h>
#include <dcpp/core/checkpoint_error.h>
#include <dcpp/state_dict/model_optimizer_state_dict.h>
#include <dcpp/state_dict/plain_layout.h>
#include <dcpp/state_dict/stateful_adapters.h>

#include <torch/nn/functional/loss.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/adagrad.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/lbfgs.h>
#include <torch/optim/rmsprop.h>
#include <torch/optim/sgd.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iomanip>
#include <map>
#include <memory>
#include <sstream>

using dcpp::StateDict;
using nlohmann::json;

using dcpp::test::python_model;

namespace {

using torch::optim::Optimizer;
using Make = std::function<std::unique_ptr<Optimizer>(std::vector<at::Tensor>, double lr)>;

// The options of tests/interop/optimizers.py's cases, by libtorch optimizer.
const std::map<std::string, Make>& optimizers() {
  using namespace torch::optim;
  static const std::map<std::string, Make> makers = {
      {"SGD",
       [](std::vector<at::Tensor> p, double lr) -> std::unique_ptr<Optimizer> {
         return std::make_unique<SGD>(
             p, SGDOptions(lr).momentum(0.9).nesterov(true).weight_decay(1e-3));
       }},
      {"Adam",
       [](std::vector<at::Tensor> p, double lr) -> std::unique_ptr<Optimizer> {
         return std::make_unique<Adam>(
             p, AdamOptions(lr).betas(std::make_tuple(0.9, 0.99)).weight_decay(0.01).amsgrad(true));
       }},
      {"AdamW",
       [](std::vector<at::Tensor> p, double lr) -> std::unique_ptr<Optimizer> {
         return std::make_unique<AdamW>(
             p, AdamWOptions(lr).betas(std::make_tuple(0.85, 0.995)).weight_decay(0.05));
       }},
      {"Adagrad",
       [](std::vector<at::Tensor> p, double lr) -> std::unique_ptr<Optimizer> {
         return std::make_unique<Adagrad>(
             p,
             AdagradOptions(lr).lr_decay(0.01).weight_decay(0.01).initial_accumulator_value(0.1));
       }},
      {"RMSprop",
       [](std::vector<at::Tensor> p, double lr) -> std::unique_ptr<Optimizer> {
         return std::make_unique<RMSprop>(
             p, RMSpropOptions(lr).alpha(0.9).momentum(0.5).centered(true).weight_decay(0.01));
       }},
      {"LBFGS",
       [](std::vector<at::Tensor> p, double lr) -> std::unique_ptr<Optimizer> {
         return std::make_unique<LBFGS>(p, LBFGSOptions(lr).max_iter(4).history_size(3));
       }},
  };
  return makers;
}

struct WriteCase {
  std::string name;       // the directory, and optimizers.py's case
  std::string optimizer;  // the key of optimizers()
  double lr;
};

const std::vector<WriteCase> write_cases = {
    {"sgd", "SGD", 0.05},         {"adam", "Adam", 0.01},       {"adamw", "AdamW", 0.01},
    {"adagrad", "Adagrad", 0.05}, {"rmsprop", "RMSprop", 0.01}, {"lbfgs", "LBFGS", 0.1},
};

float step(torch::nn::Sequential& model, Optimizer& optimizer, const at::Tensor& x,
           const at::Tensor& y) {
  auto closure = [&] {
    optimizer.zero_grad();
    at::Tensor loss = torch::nn::functional::mse_loss(model->forward(x), y);
    loss.backward();
    return loss;
  };
  return optimizer.step(closure).item<float>();
}

// A param group's options (as dcpp encodes them) as JSON: numbers, bools, None, betas, strings.
json options_json(const StateDict& group) {
  json out = json::object();
  for (const auto& item : group) {
    if (item.key == "params") {
      continue;
    }
    const c10::IValue& v = item.value.value();
    if (v.isNone()) {
      out[item.key] = nullptr;
    } else if (v.isBool()) {
      out[item.key] = v.toBool();
    } else if (v.isInt()) {
      out[item.key] = v.toInt();
    } else if (v.isDouble()) {
      out[item.key] = v.toDouble();
    } else if (v.isString()) {
      out[item.key] = v.toStringRef();
    } else if (v.isTuple()) {
      json pair = json::array();
      for (const c10::IValue& element : v.toTupleRef().elements()) {
        pair.push_back(element.toDouble());
      }
      out[item.key] = pair;
    } else {
      FAIL("option " << item.key << " has an unexpected type " << v.tagKind());
    }
  }
  return out;
}

// Every option Python saved equals what the libtorch optimizer now holds (as dcpp encodes it).
void require_same_options(const json& python, const json& libtorch) {
  for (const auto& [key, value] : python.items()) {
    INFO("option " << key << ": Python " << value.dump() << ", libtorch "
                   << (libtorch.contains(key) ? libtorch[key].dump() : "absent"));
    REQUIRE(libtorch.contains(key));
    if (value.is_number()) {
      REQUIRE(libtorch[key].is_number());
      REQUIRE(libtorch[key].get<double>() == value.get<double>());
    } else {
      REQUIRE(libtorch[key] == value);
    }
  }
}

json read_json(const std::filesystem::path& path) {
  std::ifstream in(path);
  REQUIRE(in.good());
  return json::parse(in);
}

}  // namespace

TEST_CASE("write every libtorch optimizer for Python to resume", "[.optimizer_interop_write]") {
  const std::filesystem::path root = dcpp::test::interop_output_dir("optimizer-interop");
  torch::manual_seed(7);
  const at::Tensor x = torch::randn({16, 4});
  const at::Tensor y = torch::randn({16, 2});
  for (const WriteCase& c : write_cases) {
    const std::filesystem::path dir = root / c.name;
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    auto model = python_model(0);
    auto optimizer = optimizers().at(c.optimizer)(model->parameters(), c.lr);
    for (int i = 0; i < 3; ++i) {
      step(model, *optimizer, x, y);
    }
    auto [model_sd, optim_sd] = dcpp::get_state_dict(*dcpp::plain_layout(*model), *optimizer);
    json out;
    out["options"] = options_json(optim_sd.at("param_groups").list()[0].dict());
    StateDict state;
    state.insert("model", model_sd);
    state.insert("optim", optim_sd);
    state.insert("x", x);
    state.insert("y", y);
    dcpp::save(state, dir / "checkpoint");
    out["next_losses"] = json::array();
    for (int i = 0; i < 2; ++i) {
      out["next_losses"].push_back(step(model, *optimizer, x, y));
    }
    std::ofstream(dir / "expected.json") << out.dump(1);
  }
}

TEST_CASE("resume what Python's optimizers wrote", "[.optimizer_interop_read]") {
  const char* in = std::getenv("DCPP_INTEROP_IN");
  if (in == nullptr) {
    FAIL("set DCPP_INTEROP_IN to the directory tests/interop/optimizers.py wrote");
  }
  int resumed = 0;
  for (const auto& entry : std::filesystem::directory_iterator(in)) {
    if (!entry.is_directory()) {
      continue;
    }
    const json expected = read_json(entry.path() / "expected.json");
    const std::string name = entry.path().filename().string();
    const std::string optimizer_name = expected["libtorch"].get<std::string>();
    const std::filesystem::path checkpoint = entry.path() / "checkpoint";
    DYNAMIC_SECTION(name << " (" << expected["torch"].get<std::string>() << ") into libtorch "
                         << optimizer_name) {
      // Another initialisation and another lr; LBFGS trains first, as optimizers.py's receiving
      // side does, so that its history lists exist with the checkpoint's lengths.
      auto model = python_model(4321);
      auto optimizer = optimizers().at(optimizer_name)(model->parameters(), 0.5);
      if (optimizer_name == "LBFGS") {
        torch::manual_seed(3);
        const at::Tensor other_x = torch::randn({16, 4});
        const at::Tensor other_y = torch::randn({16, 2});
        for (int i = 0; i < 3; ++i) {
          step(model, *optimizer, other_x, other_y);
        }
      }
      const auto layout = dcpp::plain_layout(*model);
      StateDict state;
      state.insert("model", dcpp::make_model_stateful(layout));
      state.insert("optim",
                   dcpp::make_optimizer_stateful(layout, dcpp::test::borrowed(*optimizer)));
      state.insert("x", at::zeros({16, 4}));
      state.insert("y", at::zeros({16, 2}));
      dcpp::load(state, checkpoint);

      const StateDict optim_sd = dcpp::get_optimizer_state_dict(*layout, *optimizer);
      require_same_options(expected["options"],
                           options_json(optim_sd.at("param_groups").list()[0].dict()));
      for (std::size_t i = 0; i < 2; ++i) {
        const float loss = step(model, *optimizer, state.at("x").tensor(), state.at("y").tensor());
        const double want = expected["next_losses"][i].get<double>();
        std::ostringstream line;
        line << std::setprecision(9) << std::fixed << name << " (torch "
             << expected["torch"].get<std::string>() << ") into libtorch " << optimizer_name
             << ": loss " << i << " libtorch " << loss << " python " << want << " |diff| "
             << std::scientific << std::setprecision(2) << std::abs(loss - want);
        std::ofstream(std::filesystem::path(in) / "resumed.txt", std::ios::app)
            << line.str() << "\n";
        INFO(line.str());
        REQUIRE(std::abs(loss - want) < 1e-5);
      }
      ++resumed;

      // Python's Adam with decoupled_weight_decay=True is AdamW: libtorch's Adam refuses it.
      if (expected["options"].value("decoupled_weight_decay", false) && optimizer_name == "AdamW") {
        auto adam_model = python_model(4321);
        torch::optim::Adam adam(adam_model->parameters(), torch::optim::AdamOptions(0.5));
        const auto adam_layout = dcpp::plain_layout(*adam_model);
        StateDict adam_state;
        adam_state.insert("model", dcpp::make_model_stateful(adam_layout));
        adam_state.insert("optim",
                          dcpp::make_optimizer_stateful(adam_layout, dcpp::test::borrowed(adam)));
        adam_state.insert("x", at::zeros({16, 4}));
        adam_state.insert("y", at::zeros({16, 2}));
        REQUIRE_THROWS_WITH(dcpp::load(adam_state, checkpoint),
                            Catch::Contains("decoupled_weight_decay=True") &&
                                Catch::Contains("use torch::optim::AdamW"));
      }
    }
  }
  REQUIRE(resumed > 0);
}
