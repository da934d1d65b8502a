// Load: back-to-back asynchronous saves with pruning under a training loop, and what they leave
// behind in the process: resident memory, open file descriptors, threads.
//
//   checkpoint_load_bench [--saves N] [--width W] [--dir PATH] [--every K]
//   dcpp-launch -n 2 -- checkpoint_load_bench ...      (FSDP over the ranks; each rank reports)
//
// The loop trains a 3-layer MLP (Adam) and saves at every step through a CheckpointManager
// (async, TBB stager, keep the latest 2: every commit prunes), so each save waits for the previous
// upload: saves run back to back. After each save returns (staged; the upload in flight) it reads
// /proc/self/statm (resident pages), /proc/self/fd and /proc/self/task. At save 10 and at the last
// save it first waits until every save is committed and pruned (manager.wait()), and compares:
// memory growth (MiB) and the exact change in descriptors and threads between the two. Memory is
// read twice there: as it is, and after malloc_trim(0) hands the allocator's free pages back to the
// system, which leaves what is in use (glibc keeps freed buffers of the upload and Gloo threads'
// arenas for reuse: resident memory grows over the first few dozen saves, then stays flat).

#include <dcpp/dcpp.h>
#include <dcpp/dist.h>

#include "bench_common.h"

#include <torch/torch.h>

#include <malloc.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace fs = std::filesystem;

namespace {

struct Options {
  int saves = 100;
  int64_t width = 1024;
  int every = 10;
  fs::path dir = fs::temp_directory_path() / "dcpp-checkpoint-load-bench";
};

struct Usage {
  double rss_mib = 0;
  double trimmed_mib = 0;  // after malloc_trim(0); measured when every save is committed
  int fds = 0;
  int threads = 0;
};

int count_entries(const char* directory) {
  int n = 0;
  for ([[maybe_unused]] const auto& entry : fs::directory_iterator(directory)) ++n;
  return n;
}

Usage usage_now(bool trim) {
  Usage u;
  u.rss_mib = bench::resident_memory().now_mib;
  if (trim) {
    ::malloc_trim(0);
    u.trimmed_mib = bench::resident_memory().now_mib;
  }
  u.fds = count_entries("/proc/self/fd") - 1;  // the iterator's own descriptor
  u.threads = count_entries("/proc/self/task");
  return u;
}

Options parse(int argc, char** argv) {
  Options o;
  CLI::App app(
      "Back-to-back async saves with pruning under a training loop: memory, descriptors "
      "and threads after each save",
      "checkpoint_load_bench");
  app.add_option("--saves", o.saves, "async saves (growth is measured from save 10)")
      ->check(CLI::Range(11, 1 << 30));
  app.add_option("--width", o.width, "model width");
  app.add_option("--every", o.every, "print every K-th save");
  app.add_option("--dir", o.dir, "checkpoint root");
  bench::parse_or_exit(app, argc, argv);
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  torch::set_num_threads(1);
  const bool launched = std::getenv("WORLD_SIZE") != nullptr;
  dcpp::LaunchEnvironment env;
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<c10d::ProcessGroup> group;
  if (launched) {
    env = dcpp::LaunchEnvironment::from_env();
    store = dcpp::make_tcp_store(env);
    group = dcpp::make_gloo_process_group(store, env.rank, env.world_size);
  }
  const fs::path root = o.dir / "checkpoints";
  if (env.rank == 0) fs::remove_all(o.dir);
  if (group) group->barrier()->wait();

  torch::manual_seed(0);
  torch::nn::Sequential model(torch::nn::Linear(64, o.width), torch::nn::Tanh(),
                              torch::nn::Linear(o.width, o.width), torch::nn::Tanh(),
                              torch::nn::Linear(o.width, 16));
  std::shared_ptr<dcpp::ModelLayout> layout;
  std::shared_ptr<dcpp::FullyShardedDataParallel> fsdp;
  std::vector<at::Tensor> parameters = model->parameters();
  if (group) {
    layout = fsdp = std::make_shared<dcpp::FullyShardedDataParallel>(model.ptr(), group);
    parameters = fsdp->parameters();
  } else {
    layout = dcpp::plain_layout(*model);
  }
  auto optimizer =
      std::make_shared<torch::optim::Adam>(parameters, torch::optim::AdamOptions(1e-3));

  dcpp::TrainingContext context;
  context.add("model", dcpp::make_model_stateful(layout))
      .add("optim", dcpp::make_optimizer_stateful(layout, optimizer))
      .add("rng", dcpp::make_rng_stateful());
  auto options = dcpp::CheckpointManagerOptions()
                     .with_root(root)
                     .with_save_every_steps(1)
                     .with_async(true)
                     .with_retention(dcpp::RetentionPolicy().with_keep_latest(2));
  if (launched) options.with_store(store, env.rank, env.world_size);
  options.stager = dcpp::make_tbb_stager();
  auto manager = std::make_shared<dcpp::CheckpointManager>(options);
  dcpp::CheckpointCallbackOptions callback_options;
  callback_options.preemption_signals = {};
  dcpp::CheckpointCallback checkpoints(manager, callback_options);
  checkpoints.on_train_begin(context);

  const auto start = std::chrono::steady_clock::now();
  Usage at_10, last, peak;
  if (env.rank == 0) {
    std::printf(
        "checkpoint_load_bench: %d back-to-back async saves (TBB stager, keep latest 2), "
        "width %lld, %d rank(s)\n",
        o.saves, static_cast<long long>(o.width), env.world_size);
    std::printf(" save   rss MiB   fds  threads   (after the save call; upload in flight)\n");
  }
  int64_t state_bytes = 0;
  for (int save = 1; save <= o.saves; ++save) {
    const at::Tensor x = at::randn({12, 64});
    const at::Tensor y = x.narrow(1, 0, 16).sin();
    optimizer->zero_grad();
    if (fsdp) fsdp->gather_parameters();
    at::Tensor loss = at::mse_loss(model->forward(x), y);
    loss.backward();
    if (fsdp) fsdp->reduce_gradients();
    optimizer->step();
    context.step += 1;
    checkpoints.on_step_end(context);  // a save at every step
    Usage u = usage_now(false);
    peak.rss_mib = std::max(peak.rss_mib, u.rss_mib);
    peak.fds = std::max(peak.fds, u.fds);
    peak.threads = std::max(peak.threads, u.threads);
    if (save == 10 || save == o.saves) {
      manager->wait();  // every save committed, pruning done
      u = usage_now(true);
      (save == 10 ? at_10 : last) = u;
    }
    if (env.rank == 0 && (save % o.every == 0 || save == 1)) {
      if (save == 10 || save == o.saves) {
        std::printf("%5d  %8.1f  %4d  %7d   all committed; rss after malloc_trim %.1f MiB\n", save,
                    u.rss_mib, u.fds, u.threads, u.trimmed_mib);
      } else {
        std::printf("%5d  %8.1f  %4d  %7d\n", save, u.rss_mib, u.fds, u.threads);
      }
    }
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  checkpoints.on_train_end(context);
  for (const auto& record : manager->history()) state_bytes = std::max(state_bytes, record.bytes);
  if (group) group->barrier()->wait();  // the coordinator's last pruning is done
  const int kept = static_cast<int>(manager->list().size());
  std::printf(
      "rank %d: %d saves in %.2f s (%.1f ms each) of %.1f MiB; %d checkpoints kept\n"
      "rank %d: save 10 -> save %d (all committed): rss %+.1f MiB (%.1f -> %.1f), after "
      "malloc_trim %+.1f MiB (%.1f -> %.1f), fds %+d (%d -> %d), threads %+d (%d -> %d); peak in "
      "flight: rss %.1f MiB, %d fds, %d threads\n",
      env.rank, o.saves, seconds, 1e3 * seconds / o.saves, state_bytes / (1024.0 * 1024.0), kept,
      env.rank, o.saves, last.rss_mib - at_10.rss_mib, at_10.rss_mib, last.rss_mib,
      last.trimmed_mib - at_10.trimmed_mib, at_10.trimmed_mib, last.trimmed_mib,
      last.fds - at_10.fds, at_10.fds, last.fds, last.threads - at_10.threads, at_10.threads,
      last.threads, peak.rss_mib, peak.fds, peak.threads);
  return 0;
}
