// fsdp_resume: train with fully sharded data parallelism, checkpoint, and resume in another layout.
//
//   dcpp-launch -n 3 -- fsdp_resume train DIR             FSDP on 3 ranks: 4 steps, then saves the
//                                                         model and Adam in DIR
//   dcpp-launch -n 2 -- fsdp_resume resume DIR ddp        resumes as data parallel on 2 ranks
//   dcpp-launch -n 2 -- fsdp_resume resume DIR pipeline   resumes as a 2-stage pipeline
//   dcpp-launch -n 1 -- fsdp_resume resume DIR single     resumes in one process
//
// Each prints its losses: the resumed runs continue the FSDP run's curve. The global batch is the
// same in every layout; each data-parallel rank trains on its equal part of it.

#include <dcpp/checkpoint/checkpointer.h>
#include <dcpp/dist/process_group.h>
#include <dcpp/parallel/data_parallel.h>
#include <dcpp/parallel/fully_sharded_data_parallel.h>
#include <dcpp/parallel/pipeline_stage.h>
#include <dcpp/state_dict/model_state_dict.h>
#include <dcpp/state_dict/optimizer_state_dict.h>
#include <dcpp/state_dict/plain_layout.h>

#include <torch/torch.h>

#include <cstdio>
#include <memory>
#include <string>

namespace {

constexpr int64_t kBatch = 12;  // divisible by 1, 2, 3 and 4 data-parallel ranks
constexpr int64_t kStepsBeforeSave = 4;
constexpr int64_t kStepsAfterResume = 2;

torch::nn::Sequential make_model() {
  torch::manual_seed(0);
  return torch::nn::Sequential(torch::nn::Linear(8, 32), torch::nn::ReLU(),
                               torch::nn::Linear(32, 32), torch::nn::ReLU(),
                               torch::nn::Linear(32, 1));
}

// A fixed regression problem: step `step`'s global batch.
std::pair<at::Tensor, at::Tensor> batch(int64_t step) {
  at::Tensor x = at::arange(kBatch * 8, at::kFloat).mul(0.37).add(step).sin().view({kBatch, 8});
  return {x, x.sum(1, /*keepdim=*/true).cos()};
}

std::pair<at::Tensor, at::Tensor> my_part(int64_t step, int rank, int world) {
  auto [x, y] = batch(step);
  const int64_t part = kBatch / world;
  return {x.narrow(0, rank * part, part), y.narrow(0, rank * part, part)};
}

double mean_over_ranks(const at::Tensor& loss, c10d::ProcessGroup& group) {
  std::vector<at::Tensor> value{loss.detach().reshape({1}).clone()};
  group.allreduce(value)->wait();
  return value[0].item<double>() / group.getSize();
}

// Saves (or restores) the model and optimizer state of any layout: the same code for all.
void save_training(const dcpp::ModelLayout& layout, torch::optim::Optimizer& optimizer,
                   const std::string& dir, const c10::intrusive_ptr<c10d::ProcessGroup>& group) {
  dcpp::StateDict state;
  state.insert("model", dcpp::get_model_state_dict(layout));
  state.insert("optim", dcpp::get_optimizer_state_dict(layout, optimizer));
  dcpp::save(state, dir, dcpp::SaveOptions().with_process_group(group));
}

void restore_training(const dcpp::ModelLayout& layout, torch::optim::Optimizer& optimizer,
                      const std::string& dir, const c10::intrusive_ptr<c10d::ProcessGroup>& group) {
  dcpp::StateDict state;  // this layout's own state dicts are the targets
  state.insert("model", dcpp::get_model_state_dict(layout));
  state.insert("optim", dcpp::get_optimizer_state_dict(layout, optimizer));
  // Reads only the pieces this rank holds.
  dcpp::load(state, dir, dcpp::LoadOptions().with_process_group(group));
  dcpp::set_model_state_dict(layout, state.at("model").dict());
  dcpp::set_optimizer_state_dict(layout, optimizer, state.at("optim").dict());
}

void print_loss(int rank, int64_t step, double loss) {
  if (rank == 0) std::printf("step %lld loss %.7f\n", static_cast<long long>(step), loss);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s train DIR | resume DIR ddp|pipeline|single\n", argv[0]);
    return 2;
  }
  const std::string mode = argv[1], dir = argv[2], layout = argc > 3 ? argv[3] : "fsdp";
  c10::intrusive_ptr<c10d::ProcessGroup> group;
  if (layout != "single") group = dcpp::make_gloo_process_group_from_env();
  const int rank = group ? group->getRank() : 0, world = group ? group->getSize() : 1;
  torch::nn::Sequential model = make_model();

  if (mode == "train") {  // FSDP: each rank keeps dim-0 shards of every parameter
    dcpp::FullyShardedDataParallel fsdp(model.ptr(), group);
    torch::optim::Adam optimizer(fsdp.parameters(), torch::optim::AdamOptions(1e-2));
    for (int64_t step = 0; step < kStepsBeforeSave; ++step) {
      auto [x, y] = my_part(step, rank, world);
      optimizer.zero_grad();
      fsdp.gather_parameters();
      at::Tensor loss = at::mse_loss(model->forward(x), y);
      loss.backward();
      fsdp.reduce_gradients();
      optimizer.step();
      print_loss(rank, step, mean_over_ranks(loss, *group));
    }
    save_training(fsdp, optimizer, dir, group);
    return 0;
  }

  const int64_t first = kStepsBeforeSave, last = kStepsBeforeSave + kStepsAfterResume;
  if (layout == "ddp") {
    dcpp::DataParallel ddp(model.ptr(), group);
    torch::optim::Adam optimizer(ddp.parameters(), torch::optim::AdamOptions(1e-2));
    restore_training(ddp, optimizer, dir, group);
    for (int64_t step = first; step < last; ++step) {
      auto [x, y] = my_part(step, rank, world);
      optimizer.zero_grad();
      at::Tensor loss = at::mse_loss(model->forward(x), y);
      loss.backward();
      ddp.synchronize_gradients();
      optimizer.step();
      print_loss(rank, step, mean_over_ranks(loss, *group));
    }
  } else if (layout == "pipeline") {
    const auto [begin, end] = dcpp::PipelineStage::even_bounds(model->size(), rank, world);
    dcpp::PipelineStage stage(dcpp::PipelineStage::slice(model, begin, end), begin, group);
    torch::optim::Adam optimizer(stage.parameters(), torch::optim::AdamOptions(1e-2));
    restore_training(stage, optimizer, dir, group);
    for (int64_t step = first; step < last; ++step) {
      auto [x, y] = batch(step);
      optimizer.zero_grad();
      at::Tensor out = stage.forward(x);
      at::Tensor loss = stage.is_last() ? at::mse_loss(out, y) : at::zeros({});
      stage.backward(loss);
      optimizer.step();
      print_loss(rank, step, stage.broadcast_from_last(loss).item<double>());
    }
  } else {
    std::shared_ptr<dcpp::ModelLayout> plain = dcpp::plain_layout(*model);
    torch::optim::Adam optimizer(model->parameters(), torch::optim::AdamOptions(1e-2));
    restore_training(*plain, optimizer, dir, {});
    for (int64_t step = first; step < last; ++step) {
      auto [x, y] = batch(step);
      optimizer.zero_grad();
      at::Tensor loss = at::mse_loss(model->forward(x), y);
      loss.backward();
      optimizer.step();
      print_loss(rank, step, loss.item<double>());
    }
  }
  return 0;
}
