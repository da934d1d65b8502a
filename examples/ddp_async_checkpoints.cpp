// ddp_async_checkpoints: data-parallel training on several ranks with asynchronous checkpoints
// every N steps through the training-loop plugin; run it again and it resumes where it stopped.
//
//   dcpp-launch [--fork] -n 2 -- ddp_async_checkpoints DIR [STEPS] [SAVE_EVERY]
//
// Prints each step's loss (the mean over the ranks) on rank 0, and the checkpoints kept in DIR.

#include <dcpp/dcpp.h>
#include <dcpp/dist.h>

#include <torch/torch.h>

#include <cstdio>
#include <string>

namespace {

constexpr int64_t kBatch = 24;  // the global batch, split evenly over the ranks

std::pair<at::Tensor, at::Tensor> my_part(int64_t step, int rank, int world) {
  at::Tensor x = at::arange(kBatch * 8, at::kFloat).mul(0.37).add(step).sin().view({kBatch, 8});
  at::Tensor y = x.sum(1, /*keepdim=*/true).cos();
  const int64_t part = kBatch / world;
  return {x.narrow(0, rank * part, part), y.narrow(0, rank * part, part)};
}

}  // namespace

int main(int argc, char** argv) {
  dcpp::become_launched_rank();  // first: dcpp-launch --fork forks the ranks here
  if (argc < 2) {
    std::fprintf(stderr, "usage: dcpp-launch -n N -- %s DIR [STEPS] [SAVE_EVERY]\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  const int64_t steps = argc > 2 ? std::stoll(argv[2]) : 12;
  const int64_t save_every = argc > 3 ? std::stoll(argv[3]) : 4;
  torch::set_num_threads(1);

  auto env = dcpp::LaunchEnvironment::from_env();
  auto store = dcpp::make_tcp_store(env);
  auto group = dcpp::make_gloo_process_group(store, env.rank, env.world_size);  // training
  torch::manual_seed(0);
  torch::nn::Sequential model(torch::nn::Linear(8, 32), torch::nn::ReLU(),
                              torch::nn::Linear(32, 1));
  auto ddp = std::make_shared<dcpp::DataParallel>(model.ptr(), group);
  auto optimizer =
      std::make_shared<torch::optim::Adam>(ddp->parameters(), torch::optim::AdamOptions(1e-2));

  // The plugin: what to checkpoint, where, how often, how many to keep.
  dcpp::TrainingContext context;
  context.add("model", dcpp::make_model_stateful(ddp))
      .add("optim", dcpp::make_optimizer_stateful(ddp, optimizer))
      .add("rng", dcpp::make_rng_stateful());
  context.content["example"] = "ddp_async_checkpoints";
  auto manager = std::make_shared<dcpp::CheckpointManager>(
      dcpp::CheckpointManagerOptions()
          .with_root(dir)
          .with_save_every_steps(save_every)
          .with_async(true)
          .with_store(store, env.rank, env.world_size)
          .with_retention(dcpp::RetentionPolicy().with_keep_latest(2)));
  dcpp::CheckpointCallback checkpoints(manager);

  checkpoints.on_train_begin(context);  // resumes from the latest complete checkpoint, if any
  if (env.rank == 0 && checkpoints.resumed_from()) {
    std::printf("resumed from %s at step %lld\n", checkpoints.resumed_from()->path.c_str(),
                static_cast<long long>(context.step));
  }
  while (context.step < steps && !context.should_stop()) {
    auto [x, y] = my_part(context.step, env.rank, env.world_size);
    optimizer->zero_grad();
    at::Tensor loss = at::mse_loss(model->forward(x), y);
    loss.backward();
    ddp->synchronize_gradients();
    optimizer->step();
    std::vector<at::Tensor> mean{loss.detach().reshape({1}).clone()};
    group->allreduce(mean)->wait();
    context.step += 1;
    context.metrics["loss"] = mean[0].item<double>() / env.world_size;
    if (env.rank == 0) {
      std::printf("step %lld loss %.7f\n", static_cast<long long>(context.step),
                  context.metrics["loss"]);
    }
    checkpoints.on_step_end(context);  // saves every SAVE_EVERY steps, in the background
  }
  checkpoints.on_train_end(context);  // final checkpoint, waits for the uploads
  if (env.rank == 0) {
    for (const auto& c : manager->list()) {
      std::printf("checkpoint %s step %lld loss %.7f\n", c.path.filename().c_str(),
                  static_cast<long long>(c.step),
                  c.metrics.count("loss") ? c.metrics.at("loss") : 0.0);
    }
  }
  // Preempted (SIGTERM or SIGUSR1: saved, then stopped): not finished, so not exit status 0.
  return checkpoints.preempted() ? dcpp::CheckpointCallback::kPreemptedExitCode : 0;
}
