// A training loop that checkpoints in the background with dcpp::AsyncCheckpointer.
//
//   async_training DIR    trains 20 steps, saving DIR/step-N every 5 steps without stopping
//                         for the copy (TBB stager); then loads the last checkpoint into a fresh
//                         model and checks it holds the parameters of the step it was saved at.
//
// The loop only waits for staging before the optimizer changes the parameters, and for the
// previous upload before starting the next save (the default policy, kWait, would too).

#include <dcpp/dcpp.h>

#include <torch/torch.h>

#include <cstdio>
#include <map>

namespace {

struct Net : torch::nn::Module {
  Net() {
    fc1 = register_module("fc1", torch::nn::Linear(64, 256));
    fc2 = register_module("fc2", torch::nn::Linear(256, 8));
  }
  torch::Tensor forward(const torch::Tensor& x) { return fc2(torch::relu(fc1(x))); }
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
};

// The parameters by name. state_dict() is called inside async_save, on the training thread.
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
  void load_state_dict(const dcpp::StateDict&) override {}  // loaded in place already

 private:
  torch::nn::Module& model_;
};

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  const std::string root = argv[1];
  try {
    torch::manual_seed(0);
    Net net;
    torch::optim::SGD optimizer(net.parameters(), torch::optim::SGDOptions(0.05));
    int64_t step = 0;

    dcpp::AsyncCheckpointerOptions options;
    options.stager = dcpp::make_tbb_stager();  // 1 copying thread at nice 19
    options.file_system.overwrite = true;
    dcpp::AsyncCheckpointer checkpointer(options);
    dcpp::AsyncSaveResponse saving;
    std::map<std::string, torch::Tensor> at_last_save;
    std::string last_dir;

    for (int i = 0; i < 20; ++i) {
      const torch::Tensor x = torch::randn({128, 64});
      const torch::Tensor y = x.narrow(1, 0, 8).cos();
      optimizer.zero_grad();
      torch::Tensor loss = torch::mse_loss(net.forward(x), y);
      loss.backward();  // reads the parameters: fine while they are being staged
      if (saving.staged.valid()) {
        saving.staged.wait();  // the optimizer is about to change them
      }
      optimizer.step();
      ++step;
      if (step % 5 == 0) {
        if (saving.committed.valid()) {
          saving.committed.wait();  // rethrows if the previous save failed
        }
        dcpp::StateDict state;
        state.insert("model", std::make_shared<ModelState>(net));
        state.insert("step", step);
        last_dir = root + "/step-" + std::to_string(step);
        saving = checkpointer.async_save(state, last_dir);
        for (const auto& item : net.named_parameters()) {
          at_last_save[item.key()] = item.value().detach().clone();
        }
        std::printf("step %lld  loss %.5f  saving %s in the background\n",
                    static_cast<long long>(step), loss.item<float>(), last_dir.c_str());
      }
    }
    saving.committed.wait();
    std::printf("last checkpoint committed: %s\n", last_dir.c_str());

    // Resume check: a fresh model loads the checkpoint and holds the save-time parameters.
    torch::manual_seed(1);
    Net fresh;
    dcpp::StateDict target;
    target.insert("model", std::make_shared<ModelState>(fresh));
    target.insert("step", 0);
    dcpp::load(target, last_dir);
    bool same = target.at("step").value().toInt() == 20;
    for (const auto& item : fresh.named_parameters()) {
      same = same && torch::equal(item.value(), at_last_save.at(item.key()));
    }
    std::printf(same ? "resume OK: the checkpoint holds the parameters of step 20\n"
                     : "resume FAILED\n");
    return same ? 0 : 1;
  } catch (const dcpp::CheckpointError& error) {
    std::fprintf(stderr, "async_training: %s\n", error.what());
    return 1;
  }
}
