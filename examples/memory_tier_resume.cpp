// memory_tier_resume: data-parallel training that keeps every step in the memory tier (shared
// memory that outlives the ranks' processes) and every 4th on disk. Kill a rank mid-step, start
// the job again, and it resumes from the step before, out of memory, exactly where it was.
// SLURM_JOB_ID, when set, names the memory tier's regions.
//
//   dcpp-launch [--fork] -n 2 -- memory_tier_resume DIR STEPS [KILL_STEP [KILL_RANK [REPLICAS
//                                          [COPY_WHILE_TRAINING [STEP_PAUSE_MS]]]]]
//
// With KILL_STEP (-1: none), rank KILL_RANK (default 1) SIGKILLs itself in the middle of step
// KILL_STEP + 1 (after its backward pass, before the gradients are exchanged); the launcher then
// stops the others. With REPLICAS (on several hosts: dcpp-launch --nnodes), each step is also
// kept in the memory of that many ranks on other hosts, so that the job survives losing a host.
// With COPY_WHILE_TRAINING 1, each step is copied to memory while the next one's forward and
// backward run (MemoryTierOptions::copy_while_training).
// With STEP_PAUSE_MS, each step's forward and backward take that many milliseconds longer (a
// stand-in for a real model's compute: kills at random moments then land inside training).
// Every rank prints where it resumed from and the step it trains from; rank 0 each step's loss
// (the mean over the ranks) as a hexadecimal float, so that runs compare bit for bit, and at the
// end a hash of the model's parameters. Lines are flushed as they end, so that a job killed at
// any moment has printed every step it finished (tests/reliability/memory_kills reads them).

#include <dcpp/dcpp.h>
#include <dcpp/dist.h>

#include <torch/torch.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

namespace {

constexpr int64_t kBatch = 24;  // the global batch, split evenly over the ranks

std::pair<at::Tensor, at::Tensor> my_part(int64_t step, int rank, int world) {
  at::Tensor x = at::arange(kBatch * 8, at::kFloat).mul(0.37).add(step).sin().view({kBatch, 8});
  at::Tensor y = x.sum(1, /*keepdim=*/true).cos();
  const int64_t part = kBatch / world;
  return {x.narrow(0, rank * part, part), y.narrow(0, rank * part, part)};
}

// FNV-1a (64 bits) over the bytes of every parameter, in order: equal hashes, equal models.
uint64_t parameters_hash(const torch::nn::Module& model) {
  uint64_t hash = 0xcbf29ce484222325ULL;
  for (const at::Tensor& parameter : model.parameters()) {
    const at::Tensor bytes = parameter.detach().contiguous();
    const auto* data = static_cast<const unsigned char*>(bytes.data_ptr());
    for (size_t i = 0; i < bytes.nbytes(); ++i) hash = (hash ^ data[i]) * 0x100000001b3ULL;
  }
  return hash;
}

}  // namespace

int main(int argc, char** argv) {
  dcpp::become_launched_rank();  // first: dcpp-launch --fork forks the ranks here
  if (argc < 3) {
    std::fprintf(stderr,
                 "usage: dcpp-launch -n N -- %s DIR STEPS [KILL_STEP [KILL_RANK [REPLICAS "
                 "[COPY_WHILE_TRAINING [STEP_PAUSE_MS]]]]]\n",
                 argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  const int64_t steps = std::stoll(argv[2]);
  const int64_t kill_step = argc > 3 ? std::stoll(argv[3]) : -1;
  const int kill_rank = argc > 4 ? std::stoi(argv[4]) : 1;
  const int replicas = argc > 5 ? std::stoi(argv[5]) : 0;
  const bool copy_while_training = argc > 6 && std::stoi(argv[6]) != 0;
  const std::chrono::milliseconds step_pause(argc > 7 ? std::stoll(argv[7]) : 0);
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // each line out as it ends, even into a pipe
  torch::set_num_threads(1);
  auto env = dcpp::LaunchEnvironment::from_env();
  auto store = dcpp::make_tcp_store(env);
  auto group = dcpp::make_gloo_process_group(store, env.rank, env.world_size);  // training

  torch::manual_seed(0);
  torch::nn::Sequential model(torch::nn::Linear(8, 64), torch::nn::ReLU(),
                              torch::nn::Linear(64, 1));
  auto ddp = std::make_shared<dcpp::DataParallel>(model.ptr(), group);
  auto optimizer =
      std::make_shared<torch::optim::Adam>(ddp->parameters(), torch::optim::AdamOptions(1e-2));
  dcpp::TrainingContext context;
  context.add("model", dcpp::make_model_stateful(ddp))
      .add("optim", dcpp::make_optimizer_stateful(ddp, optimizer));

  // Every step to memory, every 4th to disk. The memory tier's regions are named after the
  // scheduler's job (a requeued Slurm job keeps its id), else after the root: either way the
  // restarted job finds them. Disk saves block here (the model is tiny); with_async(true) for a
  // large one.
  dcpp::MemoryTierOptions memory =
      dcpp::MemoryTierOptions().with_every_steps(1).with_copy_while_training(copy_while_training);
  if (const char* job = std::getenv("SLURM_JOB_ID")) memory.with_job(std::string("slurm-") + job);
  if (replicas > 0) {
    // The replicas travel over a group of their own, beside the training group: a background
    // thread sends them while training goes on.
    memory.with_replicas(replicas, dcpp::make_gloo_process_group(
                                       store, env.rank, env.world_size,
                                       dcpp::ProcessGroupOptions().with_group_name("replicas")));
  }
  auto manager = std::make_shared<dcpp::CheckpointManager>(
      dcpp::CheckpointManagerOptions()
          .with_root(dir)
          .with_memory(memory)
          .with_save_every_steps(4)
          .with_async(false)
          .with_store(store, env.rank, env.world_size)
          .with_retention(dcpp::RetentionPolicy().with_keep_latest(2)));
  dcpp::CheckpointCallback checkpoints(manager);
  checkpoints.on_train_begin(context);  // the newest step every rank holds, memory first
  if (checkpoints.resumed_from()) {
    std::printf("rank %d resumed from '%s' at step %lld\n", env.rank,
                checkpoints.resumed_from()->path.c_str(), static_cast<long long>(context.step));
  }
  std::printf("rank %d trains from step %lld\n", env.rank, static_cast<long long>(context.step));
  // A rank that dies makes the others' next collective fail: they stop too, and the job is
  // started again (by hand here; by the launcher or the scheduler in production).
  try {
    while (context.step < steps && !context.should_stop()) {
      auto [x, y] = my_part(context.step, env.rank, env.world_size);
      optimizer->zero_grad();
      at::Tensor loss = at::mse_loss(model->forward(x), y);
      loss.backward();
      if (step_pause.count() > 0) std::this_thread::sleep_for(step_pause);
      // The state changes from here on: a memory step copied while training went on is complete
      // once this returns (at once without copy_while_training).
      checkpoints.on_before_optimizer_step(context);
      if (context.step == kill_step && env.rank == kill_rank) {
        std::printf("rank %d: SIGKILL in the middle of step %lld\n", env.rank,
                    static_cast<long long>(context.step + 1));
        std::fflush(stdout);
        std::raise(SIGKILL);
      }
      ddp->synchronize_gradients();
      optimizer->step();
      std::vector<at::Tensor> mean{loss.detach().reshape({1}).clone()};
      group->allreduce(mean)->wait();
      context.step += 1;
      context.metrics["loss"] = mean[0].item<double>() / env.world_size;
      if (env.rank == 0) {
        std::printf("step %lld loss %a\n", static_cast<long long>(context.step),
                    context.metrics["loss"]);
      }
      checkpoints.on_step_end(context);  // to memory every step; to disk every 4th
    }
  } catch (const std::exception& e) {
    checkpoints.on_exception(context, std::current_exception());
    std::fprintf(stderr, "rank %d stopped at step %lld: %s\n", env.rank,
                 static_cast<long long>(context.step), e.what());
    return 1;
  }
  checkpoints.on_train_end(context);  // the last step to disk; the memory regions released
  if (env.rank == 0) {
    std::printf("parameters fnv1a64 %016llx\n",
                static_cast<unsigned long long>(parameters_hash(*model)));
    std::printf("finished at step %lld\n", static_cast<long long>(context.step));
  }
  return checkpoints.preempted() ? dcpp::CheckpointCallback::kPreemptedExitCode : 0;
}
