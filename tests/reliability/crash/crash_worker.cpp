// One rank of the crash-consistency job, started by dcpp-launch (see crash_driver.cpp).
//
//   crash_worker train  ROOT RECORDS [options]   resume from ROOT's latest complete checkpoint
//       (comparing what was loaded with RECORDS), then train with async checkpoints every
//       --save-every steps (TBB stager, keep the latest 2) until killed. Before each save every
//       rank writes RECORDS/step-XXXXXXXX.rank-R: what it is about to save.
//   crash_worker verify ROOT RECORDS [options]   resume and compare, then exit (any layout and
//       world size: --layout fsdp or ddp).
//
// Lines for the driver (stdout, one per rank):
//   RESUME rank R step N verified E entries B bytes   (or "RESUME rank R none": nothing to resume)
//   MISMATCH rank R step N: ...                        (then exit code 3)
//   TRAINING rank R from step N
// The job is deterministic: every rank draws the same random inputs (the RNG is checkpointed) and
// takes its part of the global batch; a data-loader position counts the samples consumed.

#include "state_record.h"

#include <dcpp/dcpp.h>
#include <dcpp/dist.h>

#include <torch/torch.h>

#include <CLI/CLI.hpp>

#include <cstdio>
#include <string>

namespace {

namespace fs = std::filesystem;

constexpr int64_t kIn = 64, kOut = 16, kBatch = 12;  // kBatch: split evenly over 1, 2, 3 ranks

struct Options {
  std::string mode, root, records, layout = "fsdp", metrics;
  int64_t save_every = 4, steps = 1000000, width = 512;
};

torch::nn::Sequential make_model(int64_t width) {
  torch::manual_seed(0);
  return torch::nn::Sequential(torch::nn::Linear(kIn, width), torch::nn::Tanh(),
                               torch::nn::Linear(width, width), torch::nn::Tanh(),
                               torch::nn::Linear(width, kOut));
}

// This rank's part of the step's batch. Every rank draws the whole batch, so the generator state
// stays the same on every rank and in every layout.
std::pair<at::Tensor, at::Tensor> my_batch(int rank, int world) {
  const at::Tensor x = at::randn({kBatch, kIn});
  const at::Tensor projection =
      at::arange(kIn * kOut, at::kFloat).mul(0.01).cos().view({kIn, kOut});
  const at::Tensor y = x.matmul(projection).sin();
  const int64_t part = kBatch / world;
  return {x.narrow(0, rank * part, part), y.narrow(0, rank * part, part)};
}

fs::path record_file(const std::string& records, int64_t step, int rank) {
  return fs::path(records) / (dcpp::step_directory_name(step) + ".rank-" + std::to_string(rank));
}

void say(const std::string& line) {
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

// Compares the restored state with what every saving rank recorded; false on a mismatch.
bool check_resumed(const dcpp::TrainingContext& context, const dcpp::CheckpointInfo& info,
                   const Options& o, int rank) {
  const std::string where = "rank " + std::to_string(rank) + " step " + std::to_string(info.step);
  if (context.step != info.step) {
    say("MISMATCH " + where + ": the context is at step " + std::to_string(context.step));
    return false;
  }
  std::vector<crash::Record> saved;
  try {
    for (int r = 0; r < info.world_size; ++r) {
      saved.push_back(crash::read_record(record_file(o.records, info.step, r)));
    }
  } catch (const std::exception& e) {
    say("MISMATCH " + where + ": " + e.what());
    return false;
  }
  const crash::Comparison c =
      crash::compare_with_saved(crash::resolve_stateful(context.state), saved);
  for (const std::string& m : c.mismatches) say("MISMATCH " + where + ": " + m);
  if (!c.equal()) return false;
  say("RESUME " + where + " verified " + std::to_string(c.entries) + " entries " +
      std::to_string(c.bytes) + " bytes");
  return true;
}

int run(const Options& o) {
  torch::set_num_threads(1);
  auto env = dcpp::LaunchEnvironment::from_env();
  auto store = dcpp::make_tcp_store(env);
  auto group = dcpp::make_gloo_process_group(store, env.rank, env.world_size);  // training
  torch::nn::Sequential model = make_model(o.width);
  std::shared_ptr<dcpp::ModelLayout> layout;
  std::shared_ptr<dcpp::FullyShardedDataParallel> fsdp;
  std::shared_ptr<dcpp::DataParallel> ddp;
  if (o.layout == "fsdp") {
    layout = fsdp = std::make_shared<dcpp::FullyShardedDataParallel>(model.ptr(), group);
  } else {
    layout = ddp = std::make_shared<dcpp::DataParallel>(model.ptr(), group);
  }
  auto optimizer = std::make_shared<torch::optim::Adam>(
      fsdp ? fsdp->parameters() : ddp->parameters(), torch::optim::AdamOptions(1e-3));
  auto position = std::make_shared<int64_t>(0);  // samples consumed: the data loader's state

  dcpp::TrainingContext context;
  context.add("model", dcpp::make_model_stateful(layout))
      .add("optim", dcpp::make_optimizer_stateful(layout, optimizer))
      .add("rng", dcpp::make_rng_stateful())
      .add("data_loader", dcpp::make_counter_stateful(position));
  context.content["job"] = "crash-consistency worker, width " + std::to_string(o.width);
  auto options = dcpp::CheckpointManagerOptions()
                     .with_root(o.root)
                     .with_save_every_steps(o.save_every)
                     .with_async(true)
                     .with_store(store, env.rank, env.world_size)
                     .with_retention(dcpp::RetentionPolicy().with_keep_latest(2));
  options.stager = dcpp::make_tbb_stager();
  if (!o.metrics.empty()) options.with_metrics_file(o.metrics);
  auto manager = std::make_shared<dcpp::CheckpointManager>(options);
  dcpp::CheckpointCallbackOptions callback_options;
  callback_options.preemption_signals = {};  // SIGTERM (the launcher stopping a job) kills
  dcpp::CheckpointCallback checkpoints(manager, callback_options);

  checkpoints.on_train_begin(context);
  const std::string me = "rank " + std::to_string(env.rank);
  if (checkpoints.resumed_from()) {
    if (!check_resumed(context, *checkpoints.resumed_from(), o, env.rank)) return 3;
  } else {
    say("RESUME " + me + " none");
  }
  if (o.mode == "verify") {
    group->barrier()->wait();  // every rank has compared before any exits
    return 0;
  }

  say("TRAINING " + me + " from step " + std::to_string(context.step));
  while (context.step < o.steps) {
    auto [x, y] = my_batch(env.rank, env.world_size);
    optimizer->zero_grad();
    if (fsdp) fsdp->gather_parameters();
    at::Tensor loss = at::mse_loss(model->forward(x), y);
    loss.backward();
    if (fsdp) {
      fsdp->reduce_gradients();
    } else {
      ddp->synchronize_gradients();
    }
    optimizer->step();
    context.step += 1;
    *position += kBatch;
    context.metrics["loss"] = loss.item<double>();
    if (manager->is_save_due(context.step)) {
      // What this rank is about to save, durable before the save starts.
      crash::write_record(crash::make_record(crash::resolve_stateful(context.state)),
                          record_file(o.records, context.step, env.rank));
    }
    checkpoints.on_step_end(context);
  }
  checkpoints.on_train_end(context);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("crash_worker: one rank of the crash-consistency job (see crash_driver)");
  Options o;
  app.add_option("mode", o.mode, "train or verify")
      ->required()
      ->check(CLI::IsMember({"train", "verify"}));
  app.add_option("root", o.root, "checkpoint root")->required();
  app.add_option("records", o.records, "directory of the state records")->required();
  app.add_option("--layout", o.layout, "fsdp or ddp")->check(CLI::IsMember({"fsdp", "ddp"}));
  app.add_option("--save-every", o.save_every, "steps between saves");
  app.add_option("--steps", o.steps, "train until this step");
  app.add_option("--width", o.width, "hidden width of the model");
  app.add_option("--metrics", o.metrics, "the manager's JSON-lines phase log");
  CLI11_PARSE(app, argc, argv);
  try {
    return run(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "crash_worker: %s\n", e.what());
    return 1;
  }
}
