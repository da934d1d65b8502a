// preemption_demo: a job that is told to stop (SIGTERM, as a cluster scheduler does) saves a
// checkpoint at the next step boundary on every rank, exits cleanly, and resumes when restarted.
//
//   preemption_demo DIR STEPS [SIGNAL_STEP [SIGNAL_RANK]]
//   dcpp-launch [--fork] -n 2 -- preemption_demo DIR STEPS [SIGNAL_STEP [SIGNAL_RANK]]
//
// At step SIGNAL_STEP, rank SIGNAL_RANK (default 0) sends itself SIGTERM. Every rank prints
// "rank R resumed at step S" (when it resumed), then "rank R preempted at step S" or
// "rank R finished at step S", and at the end the parameters' checksum. A preempted run exits
// with CheckpointCallback::kPreemptedExitCode (75), so that a scheduler requeues it rather than
// take it for finished; Ctrl-C (SIGINT) preempts too.

#include <dcpp/dcpp.h>
#include <dcpp/dist.h>

#include <torch/torch.h>

#include <csignal>
#include <cstdio>
#include <string>

int main(int argc, char** argv) {
  dcpp::become_launched_rank();  // first: dcpp-launch --fork forks the ranks here
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s DIR STEPS [SIGNAL_STEP [SIGNAL_RANK]]\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  const int64_t steps = std::stoll(argv[2]);
  const int64_t signal_step = argc > 3 ? std::stoll(argv[3]) : -1;
  const int signal_rank = argc > 4 ? std::stoi(argv[4]) : 0;
  torch::set_num_threads(1);

  const bool distributed = std::getenv("WORLD_SIZE") != nullptr;
  dcpp::LaunchEnvironment env;
  c10::intrusive_ptr<c10d::Store> store;
  if (distributed) {
    env = dcpp::LaunchEnvironment::from_env();
    store = dcpp::make_tcp_store(env);
  }
  torch::manual_seed(0);
  torch::nn::Linear model(4, 1);
  auto optimizer =
      std::make_shared<torch::optim::SGD>(model->parameters(), torch::optim::SGDOptions(0.1));
  auto samples_seen = std::make_shared<int64_t>(0);  // a data loader's position

  dcpp::TrainingContext context;
  context.add("model", dcpp::make_model_stateful(dcpp::plain_layout(*model)))
      .add("optim", dcpp::make_optimizer_stateful(dcpp::plain_layout(*model), optimizer))
      .add("data_loader", dcpp::make_counter_stateful(samples_seen));
  dcpp::CheckpointManagerOptions options;
  options.with_root(dir).with_save_every_steps(1000).with_async(true);
  if (distributed) options.with_store(store, env.rank, env.world_size);
  auto manager = std::make_shared<dcpp::CheckpointManager>(options);
  dcpp::CheckpointCallback checkpoints(manager,
                                       dcpp::CheckpointCallbackOptions()
                                           .with_preemption_signals({SIGTERM, SIGUSR1, SIGINT})
                                           .with_save_at_end(true));

  checkpoints.on_train_begin(context);
  if (checkpoints.resumed_from()) {
    std::printf("rank %d resumed at step %lld\n", env.rank, static_cast<long long>(context.step));
  }
  while (context.step < steps && !context.should_stop()) {
    at::Tensor x = at::arange(8, at::kFloat).view({2, 4}).add(context.step).cos();
    optimizer->zero_grad();
    at::Tensor loss = model->forward(x).pow(2).mean();
    loss.backward();
    optimizer->step();
    *samples_seen += 2;
    context.step += 1;
    context.metrics["loss"] = loss.item<double>();
    if (context.step == signal_step && env.rank == signal_rank) std::raise(SIGTERM);
    checkpoints.on_step_end(context);  // every rank saves the same step, then asks to stop
  }
  checkpoints.on_train_end(context);
  std::printf("rank %d %s at step %lld samples %lld\n", env.rank,
              checkpoints.preempted() ? "preempted" : "finished",
              static_cast<long long>(context.step), static_cast<long long>(*samples_seen));
  std::printf("rank %d checksum %.9f\n", env.rank,
              (model->weight.sum() + model->bias.sum()).item<double>());
  return checkpoints.preempted() ? dcpp::CheckpointCallback::kPreemptedExitCode : 0;
}
