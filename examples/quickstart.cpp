// dcpp quickstart: train a small libtorch model, checkpoint it, and resume in a fresh process.
//
//   quickstart train  DIR   trains 3 steps, saves DIR/step-3, then trains 2 more steps and
//                           records their losses in DIR/expected-losses.txt
//   quickstart resume DIR   builds a fresh model and optimizer, loads DIR/step-3, trains 2 steps
//                           and checks that the losses equal the recorded ones, bit for bit
//
// The model and optimizer take part through dcpp::make_app_stateful (the state-dict helpers: keys
// are parameter names, optimizer state in DCP's layout), so the checkpoint is a plain DCP
// checkpoint that Python's dcp.load and set_state_dict read too.

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

struct Trainer {
  Net net;
  std::shared_ptr<torch::optim::Adam> optimizer =
      std::make_shared<torch::optim::Adam>(net.parameters(), torch::optim::AdamOptions(1e-2));
  int64_t step = 0;

  dcpp::StateDict checkpoint_state() {
    dcpp::StateDict sd;
    // DCP's AppState: {"model": ..., "optim": ...} keyed by parameter names, as Python's
    // get_state_dict writes them (libtorch's own optimizer state is keyed by TensorImpl address,
    // which means nothing in another process).
    sd.insert("app", dcpp::make_app_stateful(dcpp::plain_layout(net), optimizer));
    sd.insert("step", step);
    return sd;
  }

  // One step on a batch that depends only on the step number.
  float train_step() {
    torch::manual_seed(1000 + step);
    const torch::Tensor x = torch::randn({64, 16});
    const torch::Tensor y = x.narrow(1, 0, 4).sin();
    optimizer->zero_grad();
    torch::Tensor loss = torch::mse_loss(net.forward(x), y);
    loss.backward();
    optimizer->step();
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
    const float loss = trainer.train_step();  // before printing trainer.step, which it advances
    std::printf("train  step %lld  loss %.6f\n", static_cast<long long>(trainer.step), loss);
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
