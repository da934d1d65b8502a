// Asynchronous checkpointing: what a save costs the training loop, measured in one run.
//
//   async_bench [--gib N] [--tensors N] [--repeat N] [--steps N] [--rss-gib N] [--saves N]
//               [--dir PATH]
//
// 1. Blocking time of async_save for an N GiB state (default 1 GiB in 64 float tensors), warm
//    staging buffers: the blocking stager against a plain memcpy of the same bytes into warm
//    buffers (target <= 1.5x), and the TBB stager's call return time (target < 5 ms).
// 2. Step time of a small training loop (matmuls on libtorch's intra-op pool) while a background
//    save of that state runs (TBB stager, 1 thread; stager and uploader at nice 19), against the
//    same loop with no save (target <= 1.15x); again at nice 10, and with priorities left alone.
// 3. Resident memory over --saves async saves of an --rss-gib state: state plus one set of
//    staging buffers, no growth.
// Each timing is the best of --repeat runs, ratios from this one run.

#include <dcpp/async/async_checkpointer.h>
#include <dcpp/async/blocking_stager.h>
#include <dcpp/async/tbb_stager.h>
#include <dcpp/checkpoint/checkpointer.h>
#include <dcpp/dist/process_group.h>
#include <dcpp/state_dict/stateful.h>

#include "bench_common.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

namespace fs = std::filesystem;
using bench::Clock;
using bench::seconds_since;

namespace {

struct Options {
  double gib = 1.0;
  int tensors = 64;
  int repeat = 5;
  int steps = 40;
  double rss_gib = 0.5;
  int saves = 20;
  fs::path dir = fs::temp_directory_path() / "dcpp-async-bench";
};

Options parse(int argc, char** argv) {
  Options options;
  CLI::App app("Asynchronous checkpointing: what a save costs the training loop", "async_bench");
  app.add_option("--gib", options.gib, "size of the state saved, GiB");
  app.add_option("--tensors", options.tensors, "tensors the state is split into");
  app.add_option("--repeat", options.repeat, "runs of each timing; the best counts");
  app.add_option("--steps", options.steps, "training steps per step-time measurement");
  app.add_option("--rss-gib", options.rss_gib, "size of the state of the memory measurement, GiB");
  app.add_option("--saves", options.saves, "async saves of the memory measurement");
  app.add_option("--dir", options.dir, "scratch directory");
  bench::parse_or_exit(app, argc, argv);
  return options;
}

dcpp::StateDict make_state(double gib, int tensors, std::vector<at::Tensor>* out = nullptr) {
  const int64_t elements = static_cast<int64_t>(gib * (1 << 30) / 4 / tensors);
  dcpp::StateDict state;
  for (int i = 0; i < tensors; ++i) {
    at::Tensor t = at::rand({elements});
    state.insert("t" + std::to_string(i), t);
    if (out != nullptr) {
      out->push_back(t);
    }
  }
  return state;
}

dcpp::AsyncCheckpointerOptions checkpointer_options(std::shared_ptr<dcpp::AsyncStager> stager,
                                                    int uploader_nice) {
  dcpp::AsyncCheckpointerOptions options;
  options.stager = std::move(stager);
  options.file_system.overwrite = true;
  options.file_system.sync_files = false;  // measure the CPU side, not the disk
  options.uploader_nice = uploader_nice;
  return options;
}

// A small training loop on libtorch's intra-op pool: a 256x256 layer forward and backward, then an
// Adam-like update of 4M parameters (elementwise ops, which ATen splits over the intra-op threads;
// Debian's reference BLAS runs matmuls on one thread).
struct TinyModel {
  at::Tensor layer = at::randn({256, 256}).div_(16);
  at::Tensor input = at::randn({256, 256});
  at::Tensor params = at::randn({1 << 22});
  at::Tensor exp_avg = at::zeros({1 << 22});
  at::Tensor exp_avg_sq = at::zeros({1 << 22});
  void step() {
    at::Tensor out = at::relu(at::mm(input, layer));
    at::Tensor layer_grad = at::mm(input.t(), out.sign());
    layer.sub_(layer_grad, 1e-6);
    at::Tensor grad = at::tanh(params * 1.01).add_(out.mean());
    exp_avg.mul_(0.9).add_(grad, 0.1);
    exp_avg_sq.mul_(0.999).addcmul_(grad, grad, 0.001);
    params.addcdiv_(exp_avg, exp_avg_sq.sqrt().add_(1e-8), -1e-3);
  }
};

// Mean step time of `steps` steps, or of the steps run until `done` (at least `steps`).
template <typename Done>
double mean_step(TinyModel& model, int steps, Done done) {
  int n = 0;
  const auto start = Clock::now();
  while (n < steps || !done()) {
    model.step();
    ++n;
  }
  return seconds_since(start) / n;
}

}  // namespace

int main(int argc, char** argv) {
  const Options options = parse(argc, argv);
  fs::create_directories(options.dir);
  at::set_num_threads(static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  std::printf("intra-op threads %d, state %.2f GiB in %d tensors, best of %d\n",
              at::get_num_threads(), options.gib, options.tensors, options.repeat);

  // ---- 3. Resident memory over repeated saves (first, in a fresh heap)
  // -------------------------------------------------
  const double empty_rss = bench::resident_memory().now_mib;
  dcpp::StateDict small = make_state(options.rss_gib, options.tensors);
  const double state_mib = options.rss_gib * 1024;
  std::ofstream("/proc/self/clear_refs") << "5";  // resets VmHWM: the peak of part 3 alone
  const double before = bench::resident_memory().now_mib;
  std::vector<double> after;
  {
    dcpp::TbbStagerOptions tbb;
    tbb.concurrency = 1;
    dcpp::AsyncCheckpointer checkpointer(checkpointer_options(dcpp::make_tbb_stager(tbb), 19));
    for (int i = 0; i < options.saves; ++i) {
      dcpp::AsyncSaveResponse response = checkpointer.async_save(small, options.dir / "rss");
      response.committed.wait();
      after.push_back(bench::resident_memory().now_mib);
    }
  }
  std::printf("\n3. resident memory over %d async saves of a %.0f MiB state (TBB stager)\n",
              options.saves, state_mib);
  std::printf("  RSS before the state was made                         %8.0f MiB\n", empty_rss);
  std::printf("  RSS before the first save (the state made)             %8.0f MiB\n", before);
  std::printf("  RSS after save 1 / 2 / %d                              %8.0f / %.0f / %.0f MiB\n",
              options.saves, after.front(), after[std::min<std::size_t>(1, after.size() - 1)],
              after.back());
  std::printf(
      "  growth from save 1 to save %d                          %8.1f MiB (staging "
      "buffers %.0f MiB)\n",
      options.saves, after.back() - after.front(), state_mib);
  std::printf(
      "  peak RSS during the saves (VmHWM)                      %8.0f MiB (expected "
      "%.0f: before + one set of buffers)\n",
      bench::resident_memory().peak_mib, before + state_mib);
  // ---- 1. Blocking time ------------------------------------------------------------------------
  std::vector<at::Tensor> sources;
  dcpp::StateDict state = make_state(options.gib, options.tensors, &sources);
  double memcpy_s = 1e9;
  {
    std::vector<at::Tensor> warm;
    for (const at::Tensor& t : sources) warm.push_back(at::empty_like(t).fill_(0));
    for (int r = 0; r < options.repeat; ++r) {
      const auto start = Clock::now();
      for (std::size_t i = 0; i < sources.size(); ++i) {
        std::memcpy(warm[i].data_ptr(), sources[i].data_ptr(), sources[i].nbytes());
      }
      memcpy_s = std::min(memcpy_s, seconds_since(start));
    }
  }
  double blocking_s = 1e9;
  {
    dcpp::AsyncCheckpointer checkpointer(checkpointer_options(dcpp::make_blocking_stager(), 19));
    checkpointer.async_save(state, options.dir / "blocking").committed.wait();  // warm
    for (int r = 0; r < options.repeat; ++r) {
      const auto start = Clock::now();
      dcpp::AsyncSaveResponse response = checkpointer.async_save(state, options.dir / "blocking");
      blocking_s = std::min(blocking_s, seconds_since(start));
      response.committed.wait();
    }
  }
  double tbb_call_s = 1e9, tbb_call_worst_s = 0, tbb_staging_s = 1e9;
  std::vector<double> tbb_calls;
  {
    dcpp::TbbStagerOptions tbb;
    tbb.concurrency = 1;
    dcpp::AsyncCheckpointer checkpointer(checkpointer_options(dcpp::make_tbb_stager(tbb), 19));
    checkpointer.async_save(state, options.dir / "tbb").committed.wait();  // warm
    for (int r = 0; r < options.repeat; ++r) {
      const auto start = Clock::now();
      dcpp::AsyncSaveResponse response = checkpointer.async_save(state, options.dir / "tbb");
      const double call = seconds_since(start);
      tbb_call_s = std::min(tbb_call_s, call);
      tbb_call_worst_s = std::max(tbb_call_worst_s, call);
      tbb_calls.push_back(call);
      response.staged.wait();
      tbb_staging_s = std::min(tbb_staging_s, seconds_since(start));
      response.committed.wait();
    }
  }
  const double gb = static_cast<double>(options.gib) * (1 << 30) / 1e9;
  std::printf("\n1. blocking time of async_save, %.2f GiB, warm buffers\n", options.gib);
  std::printf("  memcpy into warm buffers     %8.1f ms  (%.2f GB/s)\n", memcpy_s * 1e3,
              gb / memcpy_s);
  std::printf("  blocking stager async_save   %8.1f ms  ratio %.2fx  (target <= 1.5x)\n",
              blocking_s * 1e3, blocking_s / memcpy_s);
  std::sort(tbb_calls.begin(), tbb_calls.end());
  std::printf(
      "  TBB stager async_save return %8.3f ms  median %.3f ms  worst %.3f ms  (target < 5 "
      "ms)\n",
      tbb_call_s * 1e3, tbb_calls[tbb_calls.size() / 2] * 1e3, tbb_call_worst_s * 1e3);
  std::printf("  TBB stager staging complete  %8.1f ms  (1 thread, nice 19, training idle)\n",
              tbb_staging_s * 1e3);

  // ---- 2. Step time while a background save runs ------------------------------------------------
  TinyModel model;
  mean_step(model, 10, [] { return true; });  // warm up
  auto with_save = [&](int nice, int* steps_run) {
    dcpp::TbbStagerOptions tbb;
    tbb.concurrency = 1;
    tbb.nice = nice;
    dcpp::AsyncCheckpointer checkpointer(checkpointer_options(dcpp::make_tbb_stager(tbb), nice));
    checkpointer.async_save(state, options.dir / "steps").committed.wait();  // warm
    const auto start = Clock::now();
    dcpp::AsyncSaveResponse response = checkpointer.async_save(state, options.dir / "steps");
    const double mean = mean_step(model, 1, [&] { return response.committed.is_ready(); });
    *steps_run = static_cast<int>(seconds_since(start) / mean + 0.5);
    response.committed.wait();
    return mean;
  };
  double alone_s = 1e9, saving_s = 1e9, saving_nice0_s = 1e9, saving_nice19_s = 1e9;
  int steps_during = 0, steps_during_nice0 = 0, steps_during_nice19 = 0;
  for (int r = 0; r < options.repeat; ++r) {
    alone_s = std::min(alone_s, mean_step(model, options.steps, [] { return true; }));
    saving_s = std::min(saving_s, with_save(19, &steps_during));
    saving_nice0_s = std::min(saving_nice0_s, with_save(0, &steps_during_nice0));
    saving_nice19_s = std::min(saving_nice19_s, with_save(10, &steps_during_nice19));
  }
  std::printf("\n2. training step time while a background save of %.2f GiB runs\n", options.gib);
  std::printf("  no save                      %8.2f ms\n", alone_s * 1e3);
  std::printf(
      "  save, threads at nice 19     %8.2f ms  ratio %.2fx  (%d steps during the save; "
      "target <= 1.15x)\n",
      saving_s * 1e3, saving_s / alone_s, steps_during);
  std::printf("  save, threads at nice 10     %8.2f ms  ratio %.2fx  (%d steps during the save)\n",
              saving_nice19_s * 1e3, saving_nice19_s / alone_s, steps_during_nice19);
  std::printf("  save, priorities unchanged   %8.2f ms  ratio %.2fx  (%d steps during the save)\n",
              saving_nice0_s * 1e3, saving_nice0_s / alone_s, steps_during_nice0);

  fs::remove_all(options.dir);
  return 0;
}
