// The memory tier's costs (issue 40, docs/performance.md), each against a baseline of the same run:
//   1. the blocking time of a rank's step written into its shared-memory slot, and of the same
//      state saved through CheckpointManager::save_to_memory (planning, metadata and all), against
//      a plain memcpy of the same bytes;
//   2. restoring that state (a restarted job's first step waits for it), each restore in a new
//      process (this program run again with --restore-child), as a restarted job does: from the
//      memory tier through CheckpointManager::restore, through the storage's one-pass path
//      (MemorySlots::complete_steps_unchecked, MemoryStepReader with verify_crc), and from the
//      disk tier with the page cache dropped (when this process may drop it; else warm, and said
//      so); each against a warm memcpy of the same bytes in the same child;
//   3. the training step of the demo's model (examples/demo_char_lm.cpp: a character MLP, Adam)
//      with a memory checkpoint every step through CheckpointCallback, copied on the training
//      thread and copied while the next step's forward and backward run
//      (MemoryTierOptions::copy_while_training), against the same loop without checkpoints.
//
//   memory_tier_bench [--gib N] [--pieces N] [--repeat N] [--steps N] [--loop-only] [--keep-heap]
//   (memory_tier_bench --restore-child MODE --job J --root R --gib N --pieces N: one restore)
//
// The state: --gib GiB (default 1) in --pieces pieces (default 64), as a staged state dict's
// tensors are. Baseline: one memcpy per piece into a warm buffer of the same size. Measured: a
// write of that step into its slot, the slots warm (each written once before: the steady state of
// a loop that saves every step), with 1 thread and with 2 (the copy and the CRC-32 the slot's
// header carries). Each timing is the best of --repeat runs; target: at most 1.2x the memcpy.
// The training loops run --steps x --repeat steps each, alternating step by step, each step
// timed; the medians count. Target: the memory checkpoint adds at most 5% to the step.

#include "bench_common.h"

#include <dcpp/dcpp.h>
#include <dcpp/storage/memory_slots.h>
#include <dcpp/storage/memory_step.h>

#include <torch/torch.h>

#include <limits.h>
#include <malloc.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <vector>

namespace {

// The demo's model and optimizer (examples/demo_char_lm.cpp), one rank, and a loop over them.
struct DemoTraining {
  static constexpr int64_t kVocab = 128, kContext = 16, kEmbedding = 32, kHidden = 128;
  static constexpr int64_t kBatch = 48;

  DemoTraining()
      : model(torch::nn::Embedding(kVocab, kEmbedding), torch::nn::Flatten(),
              torch::nn::Linear(kContext * kEmbedding, kHidden), torch::nn::ReLU(),
              torch::nn::Linear(kHidden, kVocab)),
        optimizer(std::make_shared<torch::optim::Adam>(model->parameters(),
                                                       torch::optim::AdamOptions(3e-3))) {
    context.add("model", dcpp::make_model_stateful(dcpp::plain_layout(*model)))
        .add("optim", dcpp::make_optimizer_stateful(dcpp::plain_layout(*model), optimizer));
  }

  // `steps` training steps, each ending with the callback's step end when one is given.
  void train(int64_t steps, dcpp::CheckpointCallback* callback) {
    for (int64_t i = 0; i < steps; ++i) train_step(callback, nullptr);
  }

  // Where one step's time went: the training (batch, forward, backward, optimizer step), the
  // callback's calls, and the minor page faults the process took meanwhile (all threads).
  struct StepPhases {
    double training_seconds = 0;
    double training_cpu_seconds = 0;  // the training thread's CPU time in it
    double callback_seconds = 0;
    long minor_faults = 0;            // the process's, during the step
    long training_thread_faults = 0;  // of the training thread, during the training
    long callback_faults = 0;         // of the training thread, during the callback's calls
  };

  // One step; its phases into `phases` when given.
  void train_step(dcpp::CheckpointCallback* callback, StepPhases* phases) {
    const long faults_before = phases != nullptr ? minor_faults() : 0;
    const long thread_faults_before = phases != nullptr ? minor_faults(RUSAGE_THREAD) : 0;
    const double cpu_before = phases != nullptr ? bench::thread_cpu_seconds() : 0;
    const auto start = bench::Clock::now();
    double in_callback = 0, callback_cpu = 0;
    long callback_faults = 0;
    const at::Tensor x = at::randint(kVocab, {kBatch, kContext}, at::kLong);
    const at::Tensor y = at::randint(kVocab, {kBatch}, at::kLong);
    optimizer->zero_grad();
    at::Tensor loss = at::cross_entropy_loss(model->forward(x), y);
    loss.backward();
    if (callback != nullptr) {
      const long before = minor_faults(RUSAGE_THREAD);
      const auto hook = bench::Clock::now();
      const double hook_cpu = bench::thread_cpu_seconds();
      callback->on_before_optimizer_step(context);
      in_callback += bench::seconds_since(hook);
      callback_cpu += bench::thread_cpu_seconds() - hook_cpu;
      callback_faults += minor_faults(RUSAGE_THREAD) - before;
    }
    optimizer->step();
    context.step += 1;
    const double trained = bench::seconds_since(start) - in_callback;
    const double trained_cpu = bench::thread_cpu_seconds() - cpu_before - callback_cpu;
    if (callback != nullptr) {
      const long before = minor_faults(RUSAGE_THREAD);
      const auto hook = bench::Clock::now();
      callback->on_step_end(context);
      in_callback += bench::seconds_since(hook);
      callback_faults += minor_faults(RUSAGE_THREAD) - before;
    }
    if (phases != nullptr) {
      phases->training_seconds = trained;
      phases->training_cpu_seconds = trained_cpu;
      phases->callback_seconds = in_callback;
      phases->minor_faults = minor_faults() - faults_before;
      phases->callback_faults = callback_faults;
      phases->training_thread_faults =
          minor_faults(RUSAGE_THREAD) - thread_faults_before - callback_faults;
    }
  }

  static long minor_faults(int who = RUSAGE_SELF) {
    rusage usage{};
    ::getrusage(who, &usage);
    return usage.ru_minflt;
  }

  torch::nn::Sequential model;
  std::shared_ptr<torch::optim::Adam> optimizer;
  dcpp::TrainingContext context;
};

// Drops the page cache (root only): "dropped", or why not.
std::string drop_page_cache() {
  ::sync();
  std::FILE* file = std::fopen("/proc/sys/vm/drop_caches", "w");
  if (file == nullptr) return "warm (the page cache cannot be dropped by this user)";
  const bool ok = std::fputs("3", file) >= 0;
  return std::fclose(file) == 0 && ok ? "dropped" : "warm (dropping the page cache failed)";
}

// The options of the restore's managers: with the memory tier of `job` or without (disk only).
dcpp::CheckpointManagerOptions restore_options(const std::string& root, const std::string& job,
                                               bool memory) {
  auto options = dcpp::CheckpointManagerOptions().with_root(root).with_async(false);
  if (memory) options.with_memory(dcpp::MemoryTierOptions().with_every_steps(1).with_job(job));
  return options;
}

// --restore-child: what a restarted rank does, in a process of its own. Its target is made and
// touched first (a restarted job's model exists, initialized, before it restores); the baseline
// is a memcpy of the same bytes between warm buffers, in this process. Prints "restore <seconds>
// memcpy <seconds>".
int restore_child(const std::string& mode, const std::string& job, const std::string& root,
                  int pieces, std::size_t piece_bytes) {
  dcpp::StateDict target;
  std::vector<at::Tensor> tensors;
  for (int i = 0; i < pieces; ++i) {
    tensors.push_back(at::zeros({static_cast<int64_t>(piece_bytes)}, at::kByte));
    target.insert("layer" + std::to_string(i), tensors.back());
  }
  std::vector<char> warm(piece_bytes * pieces, 1);
  const double memcpy_seconds = bench::best_seconds(
      3, [] {},
      [&] {
        for (int i = 0; i < pieces; ++i) {
          std::memcpy(warm.data() + i * piece_bytes, tensors[i].data_ptr(), piece_bytes);
        }
      });
  double seconds = 0;
  if (mode == "verified") {
    const auto start = bench::Clock::now();
    std::vector<dcpp::MemoryStep> steps =
        dcpp::MemorySlots(job, 0, std::numeric_limits<int64_t>::max(), 1)
            .complete_steps_unchecked();
    if (steps.empty()) {
      std::fprintf(stderr, "no memory step of job %s\n", job.c_str());
      return 1;
    }
    dcpp::MemoryStepReader reader({steps.front()}, /*verify_crc=*/true);
    dcpp::load(target, reader);
    seconds = bench::seconds_since(start);
  } else {
    dcpp::CheckpointManager manager(restore_options(root, job, mode == "memory"));
    const auto start = bench::Clock::now();
    manager.restore(target);
    seconds = bench::seconds_since(start);
  }
  for (int i = 0; i < pieces; ++i) {  // what was saved: piece i is all bytes i
    const auto* bytes = static_cast<const unsigned char*>(tensors[i].data_ptr());
    if (bytes[0] != static_cast<unsigned char>(i) ||
        bytes[piece_bytes - 1] != static_cast<unsigned char>(i)) {
      std::fprintf(stderr, "restore (%s): piece %d not restored\n", mode.c_str(), i);
      return 1;
    }
  }
  std::printf("restore %.6f memcpy %.6f\n", seconds, memcpy_seconds);
  return 0;
}

// Runs this program as --restore-child `mode`; {restore, memcpy} seconds.
std::pair<double, double> restore_in_child(const std::string& mode, const std::string& job,
                                           const std::string& root, double gib, int pieces) {
  char self[PATH_MAX] = {};
  if (::readlink("/proc/self/exe", self, sizeof self - 1) < 0) std::exit(1);
  const std::string command = std::string(self) + " --restore-child " + mode + " --job " + job +
                              " --root '" + root + "' --gib " + std::to_string(gib) + " --pieces " +
                              std::to_string(pieces);
  std::FILE* child = ::popen(command.c_str(), "r");
  double restore = 0, copy = 0;
  if (child == nullptr || std::fscanf(child, "restore %lf memcpy %lf", &restore, &copy) != 2 ||
      ::pclose(child) != 0) {
    std::fprintf(stderr, "the restore in a new process (%s) failed\n", command.c_str());
    std::exit(1);
  }
  return {restore, copy};
}

// A restarted job's restore of `state`'s bytes, each in a new process: from memory through the
// manager, through the storage's one-pass path, and from disk; interleaved, the best of `repeat`.
void bench_restore(const dcpp::StateDict& state, double gib, int pieces, int repeat) {
  bench::TempDir root;
  const std::string job = "memory-tier-bench-restore-" + std::to_string(::getpid());
  {
    dcpp::CheckpointManager manager(restore_options(root.path(), job, true));
    manager.save(state, dcpp::SaveRequest().with_step(1));  // to disk and to memory
  }
  const char* modes[] = {"memory", "verified", "disk"};
  double best[3] = {1e30, 1e30, 1e30}, copy[3] = {1e30, 1e30, 1e30};
  std::string cache;
  // The disk's restore first in each round: dropping the page cache drops libtorch's code too,
  // which the next process then faults in from disk during its restore. A restarted rank finds
  // its code cached (the job ran a moment ago): the memory restores follow a warm process.
  const int order[] = {2, 0, 1};
  for (int r = 0; r < repeat; ++r) {
    for (const int m : order) {
      if (m == 2) cache = drop_page_cache();
      const auto [seconds, memcpy_seconds] =
          restore_in_child(modes[m], job, root.path(), gib, pieces);
      best[m] = std::min(best[m], seconds);
      copy[m] = std::min(copy[m], memcpy_seconds);
    }
  }
  dcpp::MemorySlots(job, 0, 1).release();
  const double memcpy_seconds = std::min({copy[0], copy[1], copy[2]});
  std::printf(
      "restore of the %.2f GiB in a new process (best of %d; a warm memcpy there: %.1f ms):\n"
      "  from memory, CheckpointManager::restore: %.1f ms, %.2fx the memcpy\n"
      "  from memory, one pass (complete_steps_unchecked, MemoryStepReader verify_crc): %.1f ms, "
      "%.2fx the memcpy (target <= 1.5x)\n"
      "  from disk (page cache %s): %.1f ms: %.1fx the manager's from memory, %.1fx the one pass "
      "(target >= 5x)\n",
      gib, repeat, memcpy_seconds * 1e3, best[0] * 1e3, best[0] / memcpy_seconds, best[1] * 1e3,
      best[1] / memcpy_seconds, cache.c_str(), best[2] * 1e3, best[2] / best[0], best[2] / best[1]);
}

// A manager with a memory tier saving every step (copying while training goes on or not), and
// the callback that saves through it.
struct MemoryCheckpoints {
  MemoryCheckpoints(const std::string& root, const std::string& job, bool copy_while_training)
      : manager(std::make_shared<dcpp::CheckpointManager>(
            dcpp::CheckpointManagerOptions()
                .with_root(root)
                .with_memory(dcpp::MemoryTierOptions()
                                 .with_every_steps(1)
                                 .with_job(job + "-" + std::to_string(::getpid()))
                                 .with_copy_while_training(copy_while_training))
                .with_async(false))),
        callback(
            manager,
            dcpp::CheckpointCallbackOptions().with_resume_enabled(false).with_save_at_end(false)) {}
  ~MemoryCheckpoints() { manager->release_memory(); }
  std::shared_ptr<dcpp::CheckpointManager> manager;
  dcpp::CheckpointCallback callback;
};

double median(std::vector<double> values) {
  std::nth_element(values.begin(), values.begin() + values.size() / 2, values.end());
  return values[values.size() / 2];
}

// One loop's steps, each timed, with their phases.
struct TimedSteps {
  std::vector<double> step_seconds, training_seconds, training_cpu_seconds, callback_seconds,
      minor_faults, training_thread_faults, callback_faults;
  void add(double step, const DemoTraining::StepPhases& phases) {
    step_seconds.push_back(step);
    training_seconds.push_back(phases.training_seconds);
    training_cpu_seconds.push_back(phases.training_cpu_seconds);
    callback_seconds.push_back(phases.callback_seconds);
    minor_faults.push_back(static_cast<double>(phases.minor_faults));
    training_thread_faults.push_back(static_cast<double>(phases.training_thread_faults));
    callback_faults.push_back(static_cast<double>(phases.callback_faults));
  }
};

void bench_training_step(int64_t steps, int repeat) {
  torch::set_num_threads(1);
  torch::manual_seed(0);
  DemoTraining plain, blocking, overlapped;
  bench::TempDir blocking_root, overlapped_root;
  MemoryCheckpoints blocking_saves(blocking_root.path(), "memory-tier-bench-loop", false);
  MemoryCheckpoints overlapped_saves(overlapped_root.path(), "memory-tier-bench-overlap", true);
  // Warm: Adam's state exists, the slots are written.
  plain.train(steps, nullptr);
  blocking.train(steps, &blocking_saves.callback);
  overlapped.train(steps, &overlapped_saves.callback);
  // Step by step, alternating, each step timed: the medians compare the loops under the same
  // conditions (a VM's neighbours slow whole stretches of a run, not one loop's steps).
  TimedSteps without_loop, blocking_loop, overlapped_loop;
  const auto timed = [](DemoTraining& training, dcpp::CheckpointCallback* callback,
                        TimedSteps& times) {
    DemoTraining::StepPhases phases;
    const auto start = bench::Clock::now();
    training.train_step(callback, &phases);
    times.add(bench::seconds_since(start), phases);
  };
  for (int64_t i = 0; i < steps * repeat; ++i) {
    timed(plain, nullptr, without_loop);
    timed(blocking, &blocking_saves.callback, blocking_loop);
    timed(overlapped, &overlapped_saves.callback, overlapped_loop);
  }
  const std::vector<double>&without_steps = without_loop.step_seconds,
        &blocking_steps = blocking_loop.step_seconds,
        &overlapped_steps = overlapped_loop.step_seconds;
  const double without = median(without_steps);
  const double with_blocking = median(blocking_steps), with_overlap = median(overlapped_steps);
  // The memory checkpoint alone, without the training between.
  dcpp::CheckpointManager& manager = *blocking_saves.manager;
  double alone = 1e30;
  for (int r = 0; r < repeat; ++r) {
    const auto start = bench::Clock::now();
    for (int64_t i = 0; i < steps; ++i) {
      manager.save_to_memory(blocking.context.state,
                             dcpp::SaveRequest().with_step(blocking.context.step + 1 + i));
    }
    alone = std::min(alone, bench::seconds_since(start) / static_cast<double>(steps));
  }
  int64_t bytes = 0;
  for (const auto& record : manager.history()) bytes = record.written_bytes;
  std::printf("demo model: a memory checkpoint alone takes %.3f ms\n", alone * 1e3);
  std::printf(
      "demo model (%lld bytes of state): median step %.3f ms without checkpoints; with a memory "
      "checkpoint every step %.3f ms: %+.1f%% copied on the training thread, %.3f ms: %+.1f%% "
      "copied while training goes on (target <= +5%%)\n",
      static_cast<long long>(bytes), without * 1e3, with_blocking * 1e3,
      (with_blocking / without - 1) * 100, with_overlap * 1e3, (with_overlap / without - 1) * 100);
  // Where the steps' time went: the direct cost (the callback's calls) and the indirect one (the
  // training itself slower beside the checkpoints), with the page faults of each step.
  const auto mean = [](const std::vector<double>& values) {
    double sum = 0;
    for (double value : values) sum += value;
    return sum / static_cast<double>(values.size());
  };
  const auto phases = [&](const char* name, const TimedSteps& loop) {
    std::printf(
        "  %-30s median: training %.3f ms (the thread's CPU %.3f ms), callback %.3f ms; minor "
        "faults per step (mean): %.1f in all, the training thread %.1f training and %.1f in the "
        "callback\n",
        name, median(loop.training_seconds) * 1e3, median(loop.training_cpu_seconds) * 1e3,
        median(loop.callback_seconds) * 1e3, mean(loop.minor_faults),
        mean(loop.training_thread_faults), mean(loop.callback_faults));
  };
  phases("without checkpoints", without_loop);
  phases("copied on the training thread", blocking_loop);
  phases("copied while training goes on", overlapped_loop);
}

}  // namespace

int main(int argc, char** argv) {
  double gib = 1.0;
  int pieces = 64;
  int repeat = 5;
  int64_t steps = 200;
  bool loop_only = false, keep_heap = false;
  std::string restore_mode, job, root;
  CLI::App app("The memory tier's blocking time against memcpy", "memory_tier_bench");
  app.add_option("--gib", gib, "size of the step, GiB");
  app.add_option("--pieces", pieces, "pieces (tensors) the step is made of");
  app.add_option("--repeat", repeat, "runs of each timing; the best counts");
  app.add_option("--steps", steps, "training steps per timing of the demo model's loop");
  app.add_flag("--loop-only", loop_only, "only the demo model's loop (part 3)");
  app.add_flag("--keep-heap", keep_heap,
               "glibc keeps freed memory (fixed mmap and trim thresholds): no page refaults");
  app.add_option("--restore-child", restore_mode, "(internal) one restore: memory|verified|disk");
  app.add_option("--job", job, "(internal) the memory tier's job of --restore-child");
  app.add_option("--root", root, "(internal) the manager's root of --restore-child");
  bench::parse_or_exit(app, argc, argv);
  if (keep_heap) {
    // What GLIBC_TUNABLES=glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=
    // 268435456 does: libtorch's per-step tensors reuse the same pages instead of glibc returning
    // them to the kernel at a step's end and the next step faulting them in again.
    ::mallopt(M_MMAP_THRESHOLD, 32 << 20);
    ::mallopt(M_TRIM_THRESHOLD, 256 << 20);
  }

  const std::size_t piece_bytes = static_cast<std::size_t>(gib * (1ULL << 30)) / pieces;
  if (!restore_mode.empty()) return restore_child(restore_mode, job, root, pieces, piece_bytes);
  if (loop_only) {
    bench_training_step(steps, repeat);
    return 0;
  }
  std::vector<std::vector<char>> state(pieces, std::vector<char>(piece_bytes));
  for (std::size_t i = 0; i < state.size(); ++i) std::memset(state[i].data(), int(i), piece_bytes);
  std::vector<dcpp::BytePiece> step;
  for (const auto& piece : state) step.push_back({piece.data(), piece.size()});

  std::vector<char> warm(piece_bytes * pieces, 1);
  const double memcpy_seconds = bench::best_seconds(
      repeat, [] {},
      [&] {
        for (std::size_t i = 0; i < state.size(); ++i) {
          std::memcpy(warm.data() + i * piece_bytes, state[i].data(), piece_bytes);
        }
      });
  std::printf("state %.2f GiB in %d pieces; memcpy into a warm buffer: %.1f ms (%.2f GiB/s)\n", gib,
              pieces, memcpy_seconds * 1e3, gib / memcpy_seconds);
  for (const int threads : {1, 2}) {
    dcpp::MemorySlots slots("memory-tier-bench-" + std::to_string(::getpid()), 0,
                            static_cast<int64_t>(piece_bytes * pieces), threads);
    int64_t next = 0;
    slots.write(next++, "warm", step);
    slots.write(next++, "warm", step);
    const double seconds = bench::best_seconds(
        repeat, [] {}, [&] { slots.write(next++, "bench", step); });
    std::printf(
        "slot write, %d thread(s): %.1f ms (%.2f GiB/s), %.2fx the memcpy (target <= 1.2x)\n",
        threads, seconds * 1e3, gib / seconds, seconds / memcpy_seconds);
    slots.release();
  }

  // The same bytes as tensors of a state dict, through the manager (2 copy threads).
  dcpp::StateDict tensors;
  for (std::size_t i = 0; i < state.size(); ++i) {
    tensors.insert("layer" + std::to_string(i),
                   at::from_blob(state[i].data(), {static_cast<int64_t>(piece_bytes)}, at::kByte));
  }
  {
    bench::TempDir root;
    dcpp::CheckpointManager manager(
        dcpp::CheckpointManagerOptions()
            .with_root(root.path())
            .with_memory(dcpp::MemoryTierOptions().with_every_steps(1).with_job(
                "memory-tier-bench-manager-" + std::to_string(::getpid())))
            .with_async(false));
    int64_t next = 0;
    const auto save = [&] {
      if (!manager.save_to_memory(tensors, dcpp::SaveRequest().with_step(next++))) {
        std::fprintf(stderr, "save_to_memory failed: %s\n", manager.history().back().error.c_str());
        std::exit(1);
      }
    };
    save();
    save();
    const double seconds = bench::best_seconds(
        repeat, [] {}, save);
    std::printf(
        "CheckpointManager::save_to_memory: %.1f ms (%.2f GiB/s), %.2fx the memcpy (target <= "
        "1.2x)\n",
        seconds * 1e3, gib / seconds, seconds / memcpy_seconds);
    manager.release_memory();
  }

  bench_restore(tensors, gib, pieces, repeat);
  bench_training_step(steps, repeat);
  return 0;
}
