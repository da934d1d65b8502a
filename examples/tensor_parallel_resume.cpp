// tensor_parallel_resume: Megatron-style tensor parallel x data parallel on a DeviceMesh,
// checkpointed, and resumed on another shape.
//
//   dcpp-launch --fork -n 4 -- tensor_parallel_resume train DIR 2 2    TP 2 x DP 2: 4 steps, then
//                                                                      saves the model and Adam
//   dcpp-launch --fork -n 2 -- tensor_parallel_resume resume DIR 1 2   resumes as TP 1 x DP 2
//   dcpp-launch --fork -n 2 -- tensor_parallel_resume resume DIR 2 1   resumes as TP 2 x DP 1
//   dcpp-launch --fork -n 1 -- tensor_parallel_resume resume DIR 1 1   resumes in one process
//
// The model is Megatron's MLP: a column-parallel layer (its weight and bias split by rows over
// "tp"), a row-parallel one (its weight split by columns, its bias whole), then a layer whole on
// every rank. The checkpoint holds the unsplit model, so any shape resumes it; each prints its
// losses, which continue the first run's curve. The global batch is the same on every shape; each
// data-parallel rank trains on its equal part.

#include <dcpp/checkpoint/checkpointer.h>
#include <dcpp/dist/device_mesh.h>
#include <dcpp/dist/launched_rank.h>
#include <dcpp/parallel/tensor_parallel.h>
#include <dcpp/parallel/tensor_parallel_layers.h>
#include <dcpp/state_dict/model_state_dict.h>
#include <dcpp/state_dict/optimizer_state_dict.h>

#include <torch/torch.h>

#include <cstdio>
#include <memory>
#include <string>

namespace {

constexpr int64_t kBatch = 12;  // divisible by 1, 2 and 4 data-parallel ranks
constexpr int64_t kStepsBeforeSave = 4;
constexpr int64_t kStepsAfterResume = 2;

// The unsplit model, the same on every rank (one seed); `seed` differs on resume, to show that
// the checkpoint, not the initialisation, decides what the run continues from.
torch::nn::Sequential split_model(uint64_t seed, const dcpp::DeviceMesh& mesh) {
  torch::manual_seed(seed);
  torch::nn::Linear up(8, 32), down(32, 8), head(8, 1);
  return torch::nn::Sequential(dcpp::ColumnParallelLinear(up, mesh.group("tp")), torch::nn::ReLU(),
                               dcpp::RowParallelLinear(down, mesh.group("tp")), torch::nn::ReLU(),
                               head);
}

// A fixed regression problem: this data-parallel rank's part of step `step`'s global batch.
std::pair<at::Tensor, at::Tensor> my_part(int64_t step, const dcpp::DeviceMesh& mesh) {
  const at::Tensor x =
      at::arange(kBatch * 8, at::kFloat).mul(0.37).add(step).sin().view({kBatch, 8});
  const at::Tensor y = x.sum(1, /*keepdim=*/true).cos();
  const int64_t part = kBatch / mesh.size("dp");
  const int64_t first = mesh.coordinate("dp") * part;
  return {x.narrow(0, first, part), y.narrow(0, first, part)};
}

double mean_over_data_parallel(const at::Tensor& loss, const dcpp::DeviceMesh& mesh) {
  std::vector<at::Tensor> value{loss.detach().reshape({1}).clone()};
  mesh.group("dp")->allreduce(value)->wait();
  return value[0].item<double>() / static_cast<double>(mesh.size("dp"));
}

}  // namespace

int main(int argc, char** argv) {
  dcpp::become_launched_rank();  // dcpp-launch --fork: the ranks fork from here
  if (argc != 5) {
    std::fprintf(stderr, "usage: %s train|resume DIR TP DP\n", argv[0]);
    return 2;
  }
  const std::string mode = argv[1], dir = argv[2];
  const int64_t tp_size = std::stoll(argv[3]), dp_size = std::stoll(argv[4]);
  const dcpp::DeviceMesh mesh = dcpp::DeviceMesh::from_env({dp_size, tp_size}, {"dp", "tp"});
  const bool resume = mode == "resume";

  torch::nn::Sequential model = split_model(resume ? 1234 : 0, mesh);
  dcpp::TensorParallel tp(model.ptr(), mesh.group("tp"), mesh.group("dp"));
  torch::optim::Adam optimizer(tp.parameters(), torch::optim::AdamOptions(1e-2));
  const auto checkpoint = dcpp::SaveOptions().with_process_group(mesh.world_group());

  int64_t first = 0, last = kStepsBeforeSave;
  if (resume) {  // this shape's own state dicts are the targets: each rank reads its pieces
    dcpp::StateDict state;
    state.insert("model", dcpp::get_model_state_dict(tp));
    state.insert("optim", dcpp::get_optimizer_state_dict(tp, optimizer));
    dcpp::load(state, dir, dcpp::LoadOptions().with_process_group(mesh.world_group()));
    dcpp::set_model_state_dict(tp, state.at("model").dict());
    dcpp::set_optimizer_state_dict(tp, optimizer, state.at("optim").dict());
    first = kStepsBeforeSave;
    last = kStepsBeforeSave + kStepsAfterResume;
  }
  for (int64_t step = first; step < last; ++step) {
    auto [x, y] = my_part(step, mesh);
    optimizer.zero_grad();
    const at::Tensor loss = at::mse_loss(model->forward(x), y);
    loss.backward();             // the layers' collectives run over "tp"
    tp.synchronize_gradients();  // the mean over "dp"
    optimizer.step();
    const double mean = mean_over_data_parallel(loss, mesh);
    if (mesh.rank() == 0) {
      std::printf("step %lld loss %.7f\n", static_cast<long long>(step), mean);
    }
  }
  if (!resume) {
    dcpp::StateDict state;
    state.insert("model", dcpp::get_model_state_dict(tp));  // ShardedTensors of the whole shapes
    state.insert("optim", dcpp::get_optimizer_state_dict(tp, optimizer));
    dcpp::save(state, dir, checkpoint);
  }
  return 0;
}
