// dcpp_memory_worker: one rank of plugin:memory_restarts_test's jobs (dcpp-launch -n N): DDP on a
// tiny model with CheckpointCallback, every step to the memory tier (named by --job), every 4th to
// disk under ROOT, and a death on demand at a step, so that the test controls which steps each
// rank's slots hold when the job dies.
//
//   dcpp_memory_worker ROOT STEPS --job NAME [--rollback-to DIR] [--die-at S --die-rank R
//                      --die-how mid|alone]
//
// --rollback-to: the run resumes from that checkpoint directory (RestoreRequest::path), forking.
// --die-at S: rank R SIGKILLs itself in step S. "mid": before the step's gradients are exchanged
// (no rank ends step S); "alone": once every other rank has ended step S, its memory step written,
// and before R ends it (R's slots stop at S - 1, the others' hold S).
// Prints "rank R resumed from 'PATH' at step N", "step S value V" (rank 0, V the parameters'
// sum as a hexadecimal float, so that runs compare bit for bit) and "finished at step S".

#include <dcpp/dcpp.h>
#include <dcpp/dist.h>

#include <torch/torch.h>

#include <CLI/CLI.hpp>

#include <csignal>
#include <cstdio>
#include <string>

namespace {

std::pair<at::Tensor, at::Tensor> batch_of(int64_t step, int rank, int world) {
  constexpr int64_t kBatch = 24;
  at::Tensor x = at::arange(kBatch * 4, at::kFloat).mul(0.21).add(step).sin().view({kBatch, 4});
  at::Tensor y = x.sum(1, /*keepdim=*/true).cos();
  const int64_t part = kBatch / world;
  return {x.narrow(0, rank * part, part), y.narrow(0, rank * part, part)};
}

[[noreturn]] void die(int rank, int64_t step) {
  std::printf("rank %d: SIGKILL in step %lld\n", rank, static_cast<long long>(step));
  std::fflush(stdout);
  std::raise(SIGKILL);
  std::abort();
}

}  // namespace

int main(int argc, char** argv) {
  std::string root, job, rollback_to, die_how = "mid";
  int64_t steps = 0, die_at = -1;
  int die_rank = 1;
  CLI::App app("one rank of plugin:memory_restarts_test's jobs");
  app.add_option("root", root)->required();
  app.add_option("steps", steps)->required();
  app.add_option("--job", job)->required();
  app.add_option("--rollback-to", rollback_to);
  app.add_option("--die-at", die_at);
  app.add_option("--die-rank", die_rank);
  app.add_option("--die-how", die_how)->check(CLI::IsMember({"mid", "alone"}));
  CLI11_PARSE(app, argc, argv);

  torch::set_num_threads(1);
  auto env = dcpp::LaunchEnvironment::from_env();
  auto store = dcpp::make_tcp_store(env);
  auto group = dcpp::make_gloo_process_group(store, env.rank, env.world_size);
  torch::manual_seed(0);
  torch::nn::Sequential model(torch::nn::Linear(4, 16), torch::nn::Tanh(),
                              torch::nn::Linear(16, 1));
  auto ddp = std::make_shared<dcpp::DataParallel>(model.ptr(), group);
  auto optimizer =
      std::make_shared<torch::optim::Adam>(ddp->parameters(), torch::optim::AdamOptions(1e-2));
  dcpp::TrainingContext context;
  context.add("model", dcpp::make_model_stateful(ddp))
      .add("optim", dcpp::make_optimizer_stateful(ddp, optimizer));
  auto manager = std::make_shared<dcpp::CheckpointManager>(
      dcpp::CheckpointManagerOptions()
          .with_root(root)
          .with_memory(dcpp::MemoryTierOptions().with_every_steps(1).with_job(job))
          .with_save_every_steps(4)
          .with_async(false)
          .with_store(store, env.rank, env.world_size));
  // No agreement at every step's end (a collective there): a rank dying "alone" skips it.
  dcpp::CheckpointCallbackOptions callback_options;
  callback_options.with_agree_every_steps(1 << 30);
  if (!rollback_to.empty()) {
    callback_options.with_resume(dcpp::RestoreRequest().with_path(rollback_to));
  }
  dcpp::CheckpointCallback checkpoints(manager, callback_options);
  checkpoints.on_train_begin(context);
  if (checkpoints.resumed_from()) {
    std::printf("rank %d resumed from '%s' at step %lld\n", env.rank,
                checkpoints.resumed_from()->path.c_str(), static_cast<long long>(context.step));
  }
  try {
    while (context.step < steps) {
      const int64_t step = context.step + 1;
      auto [x, y] = batch_of(step, env.rank, env.world_size);
      optimizer->zero_grad();
      at::mse_loss(model->forward(x), y).backward();
      checkpoints.on_before_optimizer_step(context);
      const bool dying = step == die_at && env.rank == die_rank;
      if (dying && die_how == "mid") die(env.rank, step);
      ddp->synchronize_gradients();
      optimizer->step();
      context.step = step;
      if (env.rank == 0) {
        at::Tensor sum = at::zeros({}, at::kDouble);
        for (const at::Tensor& p : model->parameters()) sum += p.detach().to(at::kDouble).sum();
        std::printf("step %lld value %a\n", static_cast<long long>(step), sum.item<double>());
        std::fflush(stdout);
      }
      if (!dying) checkpoints.on_step_end(context);
      if (step == die_at && die_how == "alone") {
        // Every other rank has ended the step (its memory step written) once this returns.
        group->barrier()->wait();
        if (dying) die(env.rank, step);
      }
    }
  } catch (const std::exception& e) {
    checkpoints.on_exception(context, std::current_exception());
    std::fprintf(stderr, "rank %d stopped at step %lld: %s\n", env.rank,
                 static_cast<long long>(context.step), e.what());
    return 1;
  }
  checkpoints.on_train_end(context);
  if (env.rank == 0) std::printf("finished at step %lld\n", static_cast<long long>(context.step));
  return 0;
}
