// The training-step cost of a remote tier's drain. One training loop (a 3-layer MLP of width W,
// Adam, batches of B) runs three times in one process, each time from the same seed:
//   none:   no checkpoints (the baseline);
//   local:  an async checkpoint every K steps to a local root (keep the latest 2);
//   tiered: the same, with a remote tier draining every committed step to s3://BUCKET/PREFIX
//           (verified, keep the latest 2 there too).
// It prints each run's mean step time and the ratios tiered/local and tiered/none, then how long
// the drain took to catch up after the loop (not part of any step). The store and credentials
// come from the AWS_* environment (docs/storage.md).
//
//   tier_drain_bench s3://BUCKET/PREFIX [--steps N] [--every K] [--width W] [--batch B]
//                    [--verify 0|1] [--dir PATH]

#include <dcpp/dcpp.h>

#include "bench_common.h"

#include <torch/torch.h>

#include <cstdio>
#include <filesystem>
#include <string>

namespace fs = std::filesystem;

namespace {

struct Options {
  std::string url;
  int steps = 100;
  int every = 10;
  int64_t width = 1024;
  int64_t batch = 32;
  bool verify = true;
  fs::path dir = fs::temp_directory_path() / "dcpp-tier-drain-bench";
};

struct Run {
  double step_seconds = 0;      // mean over the loop's steps, saves included
  double catch_up_seconds = 0;  // after the loop: the last commits (and drain passes)
  int64_t state_bytes = 0;
};

Run train(const Options& o, const char* mode) {
  const bool checkpoints = std::string(mode) != "none";
  const bool tiered = std::string(mode) == "tiered";
  torch::manual_seed(0);
  torch::nn::Sequential model(torch::nn::Linear(64, o.width), torch::nn::Tanh(),
                              torch::nn::Linear(o.width, o.width), torch::nn::Tanh(),
                              torch::nn::Linear(o.width, 8));
  torch::optim::Adam optimizer(model->parameters(), torch::optim::AdamOptions(1e-3));
  std::shared_ptr<dcpp::ModelLayout> layout = dcpp::plain_layout(*model);
  dcpp::TrainingContext context;
  context.add("model", dcpp::make_model_stateful(layout))
      .add("optim", dcpp::make_optimizer_stateful(layout, optimizer));

  const fs::path root = o.dir / mode;
  fs::remove_all(root);
  dcpp::CheckpointManagerOptions options;
  options.with_root(root).with_save_every_steps(o.every).with_async(true).with_retention(
      dcpp::RetentionPolicy().with_keep_latest(2));
  if (tiered) {
    options.with_remote(
        dcpp::RemoteTierOptions().with_url(o.url).with_verify(o.verify).with_retention(
            dcpp::RetentionPolicy().with_keep_latest(2)));
  }
  std::shared_ptr<dcpp::CheckpointManager> manager;
  std::unique_ptr<dcpp::CheckpointCallback> callback;
  if (checkpoints) {
    manager = std::make_shared<dcpp::CheckpointManager>(options);
    callback = std::make_unique<dcpp::CheckpointCallback>(manager);
  }

  Run run;
  const auto start = bench::Clock::now();
  for (int step = 0; step < o.steps; ++step) {
    at::Tensor x = at::randn({o.batch, 64}), y = at::randn({o.batch, 8});
    optimizer.zero_grad();
    at::mse_loss(model->forward(x), y).backward();
    optimizer.step();
    context.step += 1;
    if (callback) callback->on_step_end(context);
  }
  run.step_seconds = bench::seconds_since(start) / o.steps;
  const auto catch_up = bench::Clock::now();
  if (manager) {
    manager->wait();
    if (tiered) manager->wait_for_remote();
    for (const auto& record : manager->history()) {
      run.state_bytes = std::max(run.state_bytes, record.bytes);
    }
  }
  run.catch_up_seconds = bench::seconds_since(catch_up);
  return run;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app("The training-step cost of draining checkpoints to a remote tier",
               "tier_drain_bench");
  app.add_option("URL", o.url, "s3://BUCKET/PREFIX of the remote tier (the store from AWS_*)")
      ->required();
  app.add_option("--steps", o.steps, "training steps per run");
  app.add_option("--every", o.every, "save every K steps");
  app.add_option("--width", o.width, "model width");
  app.add_option("--batch", o.batch, "samples per step");
  app.add_option("--verify", o.verify, "read every uploaded object back (RemoteTierOptions)");
  app.add_option("--dir", o.dir, "local roots");
  bench::parse_or_exit(app, argc, argv);

  train(o, "none");  // warm-up: allocator, thread pools
  const Run none = train(o, "none");
  const Run local = train(o, "local");
  const Run tiered = train(o, "tiered");
  std::printf("state %.1f MiB, %d steps, a checkpoint every %d (torch threads %d)\n",
              local.state_bytes / 1048576.0, o.steps, o.every, torch::get_num_threads());
  std::printf("%-8s %12s %14s\n", "run", "step ms", "catch-up s");
  for (const auto& [name, run] : {std::pair{"none", none}, {"local", local}, {"tiered", tiered}}) {
    std::printf("%-8s %12.3f %14.3f\n", name, run.step_seconds * 1e3, run.catch_up_seconds);
  }
  std::printf("step time ratio tiered/local: %.3f   tiered/none: %.3f   local/none: %.3f\n",
              tiered.step_seconds / local.step_seconds, tiered.step_seconds / none.step_seconds,
              local.step_seconds / none.step_seconds);
  fs::remove_all(o.dir);
  return 0;
}
