// Checkpointing from a GPU (issue 39, docs/gpu.md), measured in one run on a CUDA device:
//
//   cuda_staging_bench [--gib N] [--tensors N] [--repeat N] [--steps N] [--dir PATH]
//
// 1. Staging throughput from device memory: the TBB stager's stage() of an N GiB state (default 4
//    GiB in 64 float tensors) on the device into its warm pinned buffers, against the same tensors
//    copied by `copy_(non_blocking=true)` into warm pinned buffers, then one synchronize (the copy
//    engine's own rate), and against `tensor.to(kCPU, /*non_blocking=*/true)` (what DCP's stagers
//    do, allocating its output each time).
// 2. async_save's blocking time for that state (the call's return), TBB and blocking stagers.
// 3. Step time of GPU training steps (matmuls, one synchronize per step as a loop that reads its
//    loss has) while a background save of that state runs, against the same steps without one.
// Each timing is the best of --repeat runs, ratios from this one run. Without a CUDA device it says
// so and exits 77.

#include <dcpp/async/async_checkpointer.h>
#include <dcpp/async/blocking_stager.h>
#include <dcpp/async/tbb_stager.h>

#include "bench_common.h"

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <torch/cuda.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace fs = std::filesystem;
using bench::Clock;
using bench::seconds_since;

namespace {

struct Options {
  double gib = 4.0;
  int tensors = 64;
  int repeat = 3;
  int steps = 30;
  fs::path dir = fs::temp_directory_path() / "dcpp-cuda-staging-bench";
};

void synchronize() { at::cuda::device_synchronize(); }

dcpp::StateDict state_on_device(const Options& options) {
  const int64_t bytes = static_cast<int64_t>(options.gib * (1LL << 30));
  const int64_t numel = bytes / 4 / options.tensors;
  dcpp::StateDict state;
  for (int i = 0; i < options.tensors; ++i) {
    state.insert("layer" + std::to_string(i),
                 at::randn({numel}, at::TensorOptions().device(at::kCUDA)));
  }
  synchronize();
  return state;
}

std::vector<at::Tensor> tensors_of(const dcpp::StateDict& state) {
  std::vector<at::Tensor> tensors;
  for (const auto& item : state) tensors.push_back(item.value.tensor());
  return tensors;
}

double gib_per_second(double gib, double seconds) { return gib / seconds; }

// Wall time of `steps` training steps: a matmul chain, synchronized once per step.
double step_seconds(int steps) {
  const at::Tensor a = at::randn({4096, 4096}, at::TensorOptions().device(at::kCUDA));
  at::Tensor b = at::randn({4096, 4096}, at::TensorOptions().device(at::kCUDA));
  synchronize();
  const auto start = Clock::now();
  for (int step = 0; step < steps; ++step) {
    for (int i = 0; i < 8; ++i) b = at::tanh(at::mm(a, b));
    synchronize();
  }
  return seconds_since(start) / steps;
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  CLI::App app("Checkpointing from a GPU: staging, async_save, step time", "cuda_staging_bench");
  app.add_option("--gib", options.gib, "size of the state on the device, GiB");
  app.add_option("--tensors", options.tensors, "tensors the state is split into");
  app.add_option("--repeat", options.repeat, "runs of each timing; the best counts");
  app.add_option("--steps", options.steps, "training steps per step-time measurement");
  app.add_option("--dir", options.dir, "where the background saves write");
  bench::parse_or_exit(app, argc, argv);
  if (!torch::cuda::is_available()) {
    std::printf("cuda_staging_bench: no CUDA device visible; nothing to measure\n");
    return 77;
  }
  std::printf("device: %s; state %.2f GiB in %d tensors\n",
              at::cuda::getCurrentDeviceProperties()->name, options.gib, options.tensors);
  const dcpp::StateDict state = state_on_device(options);
  const std::vector<at::Tensor> sources = tensors_of(state);

  // 1. Staging throughput.
  std::vector<at::Tensor> pinned;
  for (const at::Tensor& source : sources) {
    pinned.push_back(
        at::empty_like(source, at::TensorOptions().device(at::kCPU).pinned_memory(true)));
  }
  const double copy_engine = bench::best_seconds(
      options.repeat, [] {},
      [&] {
        for (std::size_t i = 0; i < sources.size(); ++i) pinned[i].copy_(sources[i], true);
        synchronize();
      });
  const double to_cpu = bench::best_seconds(
      options.repeat, [] {},
      [&] {
        std::vector<at::Tensor> copies;
        for (const at::Tensor& source : sources) copies.push_back(source.to(at::kCPU, true));
        synchronize();
      });
  std::shared_ptr<dcpp::AsyncStager> tbb = dcpp::make_tbb_stager();
  tbb->stage(state).wait();  // warm buffers
  const double staged = bench::best_seconds(
      options.repeat, [] {}, [&] { tbb->stage(state).wait(); });
  std::printf(
      "staging: copy_(non_blocking) into warm pinned %.2f GiB/s, .to(kCPU, non_blocking) "
      "%.2f GiB/s, dcpp TBB stager %.2f GiB/s (%.2fx the copy engine's time)\n",
      gib_per_second(options.gib, copy_engine), gib_per_second(options.gib, to_cpu),
      gib_per_second(options.gib, staged), staged / copy_engine);

  // 2. async_save's blocking time.
  fs::remove_all(options.dir);
  for (const std::string name : {"tbb", "blocking"}) {
    dcpp::AsyncCheckpointerOptions checkpointer_options;
    checkpointer_options.stager =
        name == "tbb" ? tbb : std::shared_ptr<dcpp::AsyncStager>(dcpp::make_blocking_stager());
    checkpointer_options.file_system.sync_files = false;
    dcpp::AsyncCheckpointer checkpointer(std::move(checkpointer_options));
    double blocking = 1e30;
    for (int run = 0; run < options.repeat; ++run) {
      const auto start = Clock::now();
      dcpp::AsyncSaveResponse response =
          checkpointer.async_save(state, (options.dir / (name + std::to_string(run))).string());
      blocking = std::min(blocking, seconds_since(start));
      response.committed.wait();
    }
    std::printf("async_save blocking time, %s stager: %.1f ms (%.2fx the copy engine's time)\n",
                name.c_str(), blocking * 1e3, blocking / copy_engine);
  }

  // 3. Step time with a background save.
  const double alone = step_seconds(options.steps);
  double during = 0;
  {
    dcpp::AsyncCheckpointerOptions checkpointer_options;
    checkpointer_options.stager = tbb;
    checkpointer_options.file_system.sync_files = false;
    dcpp::AsyncCheckpointer checkpointer(std::move(checkpointer_options));
    dcpp::AsyncSaveResponse response =
        checkpointer.async_save(state, (options.dir / "during").string());
    during = step_seconds(options.steps);
    response.committed.wait();
  }
  std::printf("step time: %.2f ms alone, %.2f ms during a background save (%.3fx)\n", alone * 1e3,
              during * 1e3, during / alone);
  fs::remove_all(options.dir);
  return 0;
}
