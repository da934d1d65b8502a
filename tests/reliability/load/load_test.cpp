// Load: back-to-back asynchronous saves with pruning under a training loop leave the process as
// they found it: the same open file descriptors and threads once every save is committed, and
// resident memory within a generous bound. (bench/checkpoint_load_bench.cpp measures 100 saves.)

#include "dcpp_test.h"

#include <dcpp/dcpp.h>
#include <dcpp/dist.h>

#include <torch/torch.h>
#include <torch/csrc/distributed/c10d/HashStore.hpp>

#include <malloc.h>
#include <unistd.h>

#include <fstream>
#include <thread>

namespace {

namespace fs = std::filesystem;

constexpr int kSaves = 30;
constexpr int64_t kWidth = 512;  // about 3.7 MB of model and Adam state

struct Usage {
  double rss_mib = 0;
  int fds = 0;
  int threads = 0;
};

int count_entries(const char* directory) {
  int n = 0;
  for ([[maybe_unused]] const auto& entry : fs::directory_iterator(directory)) ++n;
  return n;
}

// Read once every save is committed, after malloc_trim(0): glibc keeps the upload's freed buffers
// in its arenas for reuse (resident memory rises over the first few dozen saves, then stays flat);
// trimming first leaves what is in use.
Usage usage_now() {
  ::malloc_trim(0);
  Usage u;
  std::ifstream statm("/proc/self/statm");
  long long pages = 0, resident = 0;
  statm >> pages >> resident;
  u.rss_mib = static_cast<double>(resident) * static_cast<double>(::sysconf(_SC_PAGESIZE)) /
              (1024.0 * 1024.0);
  u.fds = count_entries("/proc/self/fd") - 1;  // the iterator's own descriptor
  u.threads = count_entries("/proc/self/task");
  return u;
}

// What one rank saw.
struct RankResult {
  Usage at_10, at_end;
  int saves_ok = 0;
  size_t kept = 0;
  std::string error;
};

// One rank of a `world`-rank job (FSDP when world > 1) that saves at every step for kSaves steps
// (async, TBB stager, keep the latest 2). At save 10 and at the last, once every rank's saves are
// committed and pruned, rank 0 reads the process's usage while the other ranks wait.
void run_rank(int rank, int world, const c10::intrusive_ptr<c10d::Store>& store,
              const fs::path& root, RankResult& result) {
  try {
    c10::intrusive_ptr<c10d::ProcessGroup> group;
    if (world > 1) {
      group = dcpp::make_gloo_process_group(store, rank, world,
                                            dcpp::ProcessGroupOptions().with_group_name("train"));
    }
    torch::nn::Sequential model(torch::nn::Linear(64, kWidth), torch::nn::Tanh(),
                                torch::nn::Linear(kWidth, kWidth), torch::nn::Tanh(),
                                torch::nn::Linear(kWidth, 16));
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
        .add("optim", dcpp::make_optimizer_stateful(layout, optimizer));
    auto options =
        dcpp::CheckpointManagerOptions().with_root(root).with_save_every_steps(1).with_retention(
            dcpp::RetentionPolicy().with_keep_latest(2));
    if (world > 1) options.with_store(store, rank, world);
    options.stager = dcpp::make_tbb_stager();
    auto manager = std::make_shared<dcpp::CheckpointManager>(options);
    dcpp::CheckpointCallbackOptions callback_options;
    callback_options.preemption_signals = {};
    dcpp::CheckpointCallback checkpoints(manager, callback_options);
    checkpoints.on_train_begin(context);

    auto measure = [&](Usage& into) {
      manager->wait();  // this rank's saves committed (the coordinator's: renamed and pruned)
      if (group) group->barrier()->wait();
      if (rank == 0) into = usage_now();
      if (group) group->barrier()->wait();
    };
    for (int save = 1; save <= kSaves; ++save) {
      const at::Tensor x = at::randn({12, 64});
      optimizer->zero_grad();
      if (fsdp) fsdp->gather_parameters();
      at::Tensor loss = at::mse_loss(model->forward(x), x.narrow(1, 0, 16).sin());
      loss.backward();
      if (fsdp) fsdp->reduce_gradients();
      optimizer->step();
      context.step += 1;
      checkpoints.on_step_end(context);
      if (save == 10) measure(result.at_10);
    }
    measure(result.at_end);
    for (const auto& record : manager->history()) result.saves_ok += record.ok ? 1 : 0;
    result.kept = manager->list().size();
    checkpoints.on_train_end(context);
  } catch (const std::exception& e) {
    result.error = e.what();
  }
}

// ASan's quarantine holds freed memory back (256 MiB by default), so under ASan resident memory
// says nothing about a leak; descriptors and threads still do.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kResidentMemoryShowsLeaks = false;
#else
constexpr bool kResidentMemoryShowsLeaks = true;
#endif

void check_no_growth(int world) {
  torch::set_num_threads(1);
  dcpp::test::TempDir dir;
  auto store = c10::make_intrusive<c10d::HashStore>();
  std::vector<RankResult> results(world);
  std::vector<std::thread> others;
  for (int r = 1; r < world; ++r) {
    others.emplace_back([&, r] { run_rank(r, world, store, dir / "ckpt", results[r]); });
  }
  run_rank(0, world, store, dir / "ckpt", results[0]);
  for (auto& t : others) t.join();

  for (int r = 0; r < world; ++r) {
    INFO("rank " << r);
    REQUIRE(results[r].error.empty());
    CHECK(results[r].saves_ok == kSaves);
    CHECK(results[r].kept == 2);
  }
  const Usage& a = results[0].at_10;
  const Usage& b = results[0].at_end;
  INFO("save 10 -> save " << kSaves << ": rss " << a.rss_mib << " -> " << b.rss_mib << " MiB, fds "
                          << a.fds << " -> " << b.fds << ", threads " << a.threads << " -> "
                          << b.threads);
  CHECK(b.fds == a.fds);
  CHECK(b.threads == a.threads);
  // A leak of one state copy per save would add 20 x 3.7 MB; allocator noise stays far below.
  if (kResidentMemoryShowsLeaks) CHECK(b.rss_mib - a.rss_mib < 24.0);
}

}  // namespace

TEST_CASE("30 back-to-back async saves with pruning on one rank leak no descriptor or thread") {
  check_no_growth(1);
}

TEST_CASE("30 back-to-back async saves with pruning on two ranks in one process leak nothing") {
  check_no_growth(2);
}
