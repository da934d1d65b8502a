// dcpp quickstart: train a small libtorch model, checkpoint it, and resume in a fresh process.
//
//   quickstart train  DIR   trains 3 steps, saves DIR/step-3, then trains 2 more steps and
//                           records their losses in DIR/expected-losses.txt
//   quickstart resume DIR   builds a fresh model and optimizer, loads DIR/step-3, trains 2 steps
//                           and checks that the losses equal the recorded ones, bit for bit
//
// The model and optimizer take part through dcpp::Stateful adapters keyed by parameter names, so
// the checkpoint is a plain DCP checkpoint Python can read too.

#include <dcpp/core/torch_compat.h>
#include <dcpp/dcpp.h>

#include <torch/torch.h>

#include <cstdio>
#include <fstream>
#include <iostream>

namespace {

constexpr int kStepsBeforeSave = 3;
constexpr int kStepsAfterSave = 2;

struct Net : torch::nn::Module {
  Net() {
    fc1 = register_module("fc1", torch::nn::Linear(16, 32));
    fc2 = register_module("fc2", torch::nn::Linear(32, 4));
  }
  torch::Tensor forward(const torch::Tensor& x) { return fc2(torch::relu(fc1(x))); }
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
};

// The model's parameters by name; loading writes into them in place.
class ModelState : public dcpp::Stateful {
 public:
  explicit ModelState(torch::nn::Module& model) : model_(model) {}
  dcpp::StateDict state_dict() override {
    dcpp::StateDict sd;
    for (const auto& item : model_.named_parameters()) {
      sd.insert(item.key(), item.value().detach());
    }
    return sd;
  }
  void load_state_dict(const dcpp::StateDict&) override {}

 private:
  torch::nn::Module& model_;
};

// Adam's per-parameter state by parameter name (libtorch keys it by TensorImpl pointer, which
// means nothing in another process).
class AdamState : public dcpp::Stateful {
 public:
  AdamState(torch::nn::Module& model, torch::optim::Adam& optimizer)
      : model_(model), optimizer_(optimizer) {}
  dcpp::StateDict state_dict() override {
    dcpp::StateDict sd;
    for (const auto& item : model_.named_parameters()) {
      auto& state = param_state(item.value());
      dcpp::StateDict entry;
      entry.insert("step", state.step());
      entry.insert("exp_avg", state.exp_avg());
      entry.insert("exp_avg_sq", state.exp_avg_sq());
      sd.insert(item.key(), entry);
    }
    return sd;
  }
  void load_state_dict(const dcpp::StateDict& sd) override {
    for (const auto& item : model_.named_parameters()) {
      param_state(item.value()).step(sd.at(item.key()).dict().at("step").value().toInt());
    }
  }

 private:
  // The state of one parameter, created (zeroed) if the optimizer has not stepped yet.
  torch::optim::AdamParamState& param_state(const torch::Tensor& param) {
    auto& states = optimizer_.state();
    const auto key = dcpp::compat::optimizer_state_key(states, param);
    if (states.find(key) == states.end()) {
      auto state = std::make_unique<torch::optim::AdamParamState>();
      state->exp_avg(torch::zeros_like(param));
      state->exp_avg_sq(torch::zeros_like(param));
      states[key] = std::move(state);
    }
    return static_cast<torch::optim::AdamParamState&>(*states[key]);
  }

  torch::nn::Module& model_;
  torch::optim::Adam& optimizer_;
};

struct Trainer {
  Net net;
  torch::optim::Adam optimizer{net.parameters(), torch::optim::AdamOptions(1e-2)};
  int64_t step = 0;

  dcpp::StateDict checkpoint_state() {
    dcpp::StateDict sd;
    sd.insert("model", std::make_shared<ModelState>(net));
    sd.insert("optim", std::make_shared<AdamState>(net, optimizer));
    sd.insert("step", step);
    return sd;
  }

  // One step on a batch that depends only on the step number.
  float train_step() {
    torch::manual_seed(1000 + step);
    const torch::Tensor x = torch::randn({64, 16});
    const torch::Tensor y = x.narrow(1, 0, 4).sin();
    optimizer.zero_grad();
    torch::Tensor loss = torch::mse_loss(net.forward(x), y);
    loss.backward();
    optimizer.step();
    ++step;
    return loss.item<float>();
  }
};

std::string checkpoint_dir(const std::string& root) {
  return root + "/step-" + std::to_string(kStepsBeforeSave);
}

int train(const std::string& root) {
  torch::manual_seed(0);
  Trainer trainer;
  for (int i = 0; i < kStepsBeforeSave; ++i) {
    std::printf("train  step %lld  loss %.6f\n", static_cast<long long>(trainer.step + 1),
                trainer.train_step());
  }
  dcpp::save(trainer.checkpoint_state(), checkpoint_dir(root));
  std::printf("saved  %s\n", checkpoint_dir(root).c_str());
  std::ofstream expected(root + "/expected-losses.txt");
  expected.precision(9);
  for (int i = 0; i < kStepsAfterSave; ++i) {
    const float loss = trainer.train_step();
    std::printf("train  step %lld  loss %.6f  (uninterrupted run)\n",
                static_cast<long long>(trainer.step), loss);
    expected << loss << "\n";
  }
  return 0;
}

int resume(const std::string& root) {
  torch::manual_seed(12345);  // a different initialisation: everything must come from the load
  Trainer trainer;
  dcpp::StateDict state = trainer.checkpoint_state();
  dcpp::load(state, checkpoint_dir(root));
  trainer.step = state.at("step").value().toInt();
  std::printf("loaded %s at step %lld\n", checkpoint_dir(root).c_str(),
              static_cast<long long>(trainer.step));
  std::ifstream expected(root + "/expected-losses.txt");
  bool same = true;
  for (int i = 0; i < kStepsAfterSave; ++i) {
    float want = 0;
    expected >> want;
    const float loss = trainer.train_step();
    const bool equal = loss == want;
    same = same && equal;
    std::printf("resume step %lld  loss %.6f  %s\n", static_cast<long long>(trainer.step), loss,
                equal ? "(same as uninterrupted)" : "DIFFERS from the uninterrupted run");
  }
  std::printf(same ? "resume OK: training continued exactly where it left off\n"
                   : "resume FAILED\n");
  return same ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3 || (std::string(argv[1]) != "train" && std::string(argv[1]) != "resume")) {
    std::fprintf(stderr, "usage: %s train|resume DIR\n", argv[0]);
    return 2;
  }
  try {
    return std::string(argv[1]) == "train" ? train(argv[2]) : resume(argv[2]);
  } catch (const dcpp::CheckpointError& error) {
    std::fprintf(stderr, "quickstart: %s\n", error.what());
    return 1;
  }
}
