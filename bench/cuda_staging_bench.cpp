// Checkpointing from a GPU (issues 39 and 59, docs/gpu.md), measured in one run on a CUDA device:
//
//   cuda_staging_bench [--gib N] [--tensors N] [--repeat N] [--steps N] [--layers N]
//                      [--small-kernels N] [--dir PATH]
//
// A. On a LLaMA-7B-shaped state (--layers decoder layers of bf16 tensors: q, k, v, o 4096x4096,
//    gate and up 11008x4096, down 4096x11008, two norms of 4096 and a vector of 11008; 0.38 GiB a
//    layer, most of it in non-power-of-two sizes):
//    1. the FIRST stage() of a new stager (its pinned buffers allocated) against a warm one,
//       each as the time to stage()'s return and to its future (the staged copy), for the TBB
//       and blocking stagers, and against the copy engine's own time for the same bytes
//       (copy_(non_blocking) into warm pinned buffers, one synchronize);
//    2. the stager's staging_bytes() beside the pinned host memory libtorch's caching host
//       allocator really holds for it (libtorch 2.7 and later report it; each block is a power of
//       two), after a change of structure (the stager's buffers for the old state stay cached), and
//       after the stager is gone;
//    3. async_save's time to return, to `staged` (AsyncSaveResponse::staged) and to `committed`,
//       TBB and blocking stagers;
//    4. a launch-bound training step (--small-kernels tiny kernels: 64x64 addmm and tanh, then one
//       synchronize) while a background save of that state runs, while it stages and while it
//       writes, against the same steps alone.
// B. On an --gib state of --tensors float tensors (power-of-two sizes; issue 39's measurements):
//    1. staging throughput from device memory: the TBB stager's warm stage() against the copy
//       engine (copy_(non_blocking) into warm pinned buffers) and against
//       `tensor.to(kCPU, non_blocking)`;
//    2. async_save's blocking time for that state, TBB and blocking stagers;
//    3. the step time of compute-bound training steps (4096x4096 matmuls, one synchronize a step)
//       while a background save runs, against the same steps alone.
// Each timing is the best of --repeat runs unless it says otherwise; each line gives its ratio
// against a baseline measured in this run. Every checkpoint is written under --dir and removed
// after its measurement; --dir itself is removed at exit. Without a CUDA device it says so and
// exits 77.

#include <dcpp/async/async_checkpointer.h>
#include <dcpp/async/blocking_stager.h>
#include <dcpp/async/tbb_stager.h>

#include "bench_common.h"

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CachingHostAllocator.h>
#include <torch/cuda.h>
#include <torch/version.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <utility>
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
  int layers = 8;
  int small_kernels = 200;
  fs::path dir = fs::temp_directory_path() / "dcpp-cuda-staging-bench";
};

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

void synchronize() { at::cuda::device_synchronize(); }

// --dir removed at exit, whatever the way out (a measurement's own checkpoint is removed after it).
struct RemoveAtExit {
  fs::path dir;
  ~RemoveAtExit() {
    std::error_code ignored;
    fs::remove_all(dir, ignored);
  }
};

void remove_checkpoint(const fs::path& path) {
  std::error_code ignored;
  fs::remove_all(path, ignored);
}

// ---- pinned host memory as libtorch's CUDA host allocator reports it ----------------------

// Its statistics came in libtorch 2.7 (at::cuda::CachingHostAllocator_getStats) and moved behind
// at::getHostAllocator(at::kCUDA) in 2.8; their fields changed names (2.7: reserved_bytes for all
// blocks, allocated_bytes for those in use; later: allocated_bytes for all, active_bytes in use),
// so the fields are picked by which exist.
#define DCPP_TORCH_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) ||       \
   (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))
#if DCPP_TORCH_AT_LEAST(2, 7)
#define DCPP_HOST_ALLOCATOR_STATS 1
template <typename Stats>
auto held_bytes(const Stats& stats, int) -> decltype(stats.reserved_bytes.current) {
  return stats.reserved_bytes.current;
}
template <typename Stats>
auto held_bytes(const Stats& stats, long) -> decltype(stats.allocated_bytes.current) {
  return stats.allocated_bytes.current;
}
template <typename Stats>
auto in_use_bytes(const Stats& stats, int) -> decltype(stats.active_bytes.current) {
  return stats.active_bytes.current;
}
template <typename Stats>
auto in_use_bytes(const Stats& stats, long) -> decltype(stats.allocated_bytes.current) {
  return stats.allocated_bytes.current;
}
at::HostStats host_stats() {
#if DCPP_TORCH_AT_LEAST(2, 8)
  return at::getHostAllocator(at::kCUDA)->get_stats();
#else
  return at::cuda::CachingHostAllocator_getStats();
#endif
}
#else
#define DCPP_HOST_ALLOCATOR_STATS 0
#endif

// Host memory now: the process's resident memory (whoever pins it: the stagers register their own
// pages with cudaHostRegister since issue 59's finding 4, libtorch's host allocator takes its
// blocks with cudaHostAlloc), and what libtorch's caching host allocator holds.
struct PinnedNow {
  double resident_mib = 0;  // VmRSS
  bool known = false;       // the allocator reports (libtorch 2.7+)
  int64_t held = 0;         // blocks it holds, in use or cached
  int64_t in_use = 0;       // blocks handed out
};

PinnedNow pinned_now() {
  PinnedNow now;
  now.resident_mib = bench::resident_memory().now_mib;
#if DCPP_HOST_ALLOCATOR_STATS
  const at::HostStats stats = host_stats();
  now.known = true;
  now.held = static_cast<int64_t>(held_bytes(stats, 0));
  now.in_use = static_cast<int64_t>(in_use_bytes(stats, 0));
#endif
  return now;
}

// Drops the allocator's cached (free) pinned blocks, so that each part starts from what it holds.
void empty_host_cache() {
#if DCPP_TORCH_AT_LEAST(2, 8)
  at::getHostAllocator(at::kCUDA)->empty_cache();
#else
  at::cuda::CachingHostAllocator_emptyCache();
#endif
}

// What the allocator takes for `bytes` requested: the next power of two (as libtorch 2.6 to 2.14
// round a block), the figure to expect where it reports nothing.
int64_t power_of_two_ceil(int64_t bytes) {
  int64_t block = 1;
  while (block < bytes) block <<= 1;
  return block;
}

int64_t rounded_bytes(const dcpp::StateDict& state) {
  int64_t total = 0;
  for (const auto& item : state) total += power_of_two_ceil(item.value.tensor().nbytes());
  return total;
}

// VmPin and VmLck of /proc/self/status, KiB: what the kernel counts as pinned or locked (the CUDA
// driver's page-locking may show in neither).
std::string kernel_pinned() {
  std::ifstream status("/proc/self/status");
  std::string line, out;
  while (std::getline(status, line)) {
    if (line.rfind("VmPin:", 0) == 0 || line.rfind("VmLck:", 0) == 0) {
      std::string value = line.substr(6);
      value.erase(0, value.find_first_not_of(" \t"));
      out += (out.empty() ? "" : ", ") + line.substr(0, 5) + " " + value;
    }
  }
  return out.empty() ? "not reported" : out;
}

std::string gib(int64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3f GiB", static_cast<double>(bytes) / kGiB);
  return text;
}

double ratio(int64_t bytes, int64_t of) {
  return of > 0 ? static_cast<double>(bytes) / static_cast<double>(of) : 0.0;
}

// One line: staging_bytes() beside the resident memory the process gained since `before`, what
// libtorch's host allocator took since then, and what its power-of-two blocks would have taken.
void print_pinned(const char* when, int64_t staging_bytes, const PinnedNow& before,
                  const PinnedNow& after, int64_t expected_blocks) {
  const auto resident =
      static_cast<int64_t>((after.resident_mib - before.resident_mib) * 1024.0 * 1024.0);
  char allocator[160];
  if (after.known) {
    std::snprintf(allocator, sizeof allocator,
                  "libtorch's host allocator holds %s more (%.2fx; %s of it in use)",
                  gib(after.held - before.held).c_str(),
                  ratio(after.held - before.held, staging_bytes),
                  gib(after.in_use - before.in_use).c_str());
  } else {
    std::snprintf(allocator, sizeof allocator,
                  "libtorch %d.%d's host allocator reports nothing (2.7+ do)", TORCH_VERSION_MAJOR,
                  TORCH_VERSION_MINOR);
  }
  std::printf(
      "host memory %s: staging_bytes() %s; resident memory %s more (%.2fx staging_bytes()); %s; "
      "the host allocator's power-of-two blocks would be %s (%.2fx); kernel: %s\n",
      when, gib(staging_bytes).c_str(), gib(resident).c_str(), ratio(resident, staging_bytes),
      allocator, gib(expected_blocks).c_str(), ratio(expected_blocks, staging_bytes),
      kernel_pinned().c_str());
}

// ---- states -----------------------------------------------------------------------------------

at::TensorOptions on_device(at::ScalarType type) {
  return at::TensorOptions().device(at::kCUDA).dtype(type);
}

// `layers` decoder layers of LLaMA-7B's shapes (hidden 4096, MLP 11008), or of LLaMA-13B's
// (5120, 13824) for the structure change; bf16, as a mixed-precision model's weights are.
dcpp::StateDict llama_state(int layers, int64_t hidden, int64_t mlp) {
  dcpp::StateDict state;
  const auto bf16 = on_device(at::kBFloat16);
  for (int layer = 0; layer < layers; ++layer) {
    const std::string prefix = "layers." + std::to_string(layer) + ".";
    for (const char* name : {"q_proj", "k_proj", "v_proj", "o_proj"}) {
      state.insert(prefix + "self_attn." + name + ".weight", at::randn({hidden, hidden}, bf16));
    }
    state.insert(prefix + "mlp.gate_proj.weight", at::randn({mlp, hidden}, bf16));
    state.insert(prefix + "mlp.up_proj.weight", at::randn({mlp, hidden}, bf16));
    state.insert(prefix + "mlp.down_proj.weight", at::randn({hidden, mlp}, bf16));
    state.insert(prefix + "input_layernorm.weight", at::randn({hidden}, bf16));
    state.insert(prefix + "post_attention_layernorm.weight", at::randn({hidden}, bf16));
    state.insert(prefix + "mlp.up_proj.bias", at::randn({mlp}, bf16));
  }
  synchronize();
  return state;
}

dcpp::StateDict flat_state(const Options& options) {
  const int64_t bytes = static_cast<int64_t>(options.gib * kGiB);
  const int64_t numel = bytes / 4 / options.tensors;
  dcpp::StateDict state;
  for (int i = 0; i < options.tensors; ++i) {
    state.insert("layer" + std::to_string(i), at::randn({numel}, on_device(at::kFloat)));
  }
  synchronize();
  return state;
}

std::vector<at::Tensor> tensors_of(const dcpp::StateDict& state) {
  std::vector<at::Tensor> tensors;
  for (const auto& item : state) tensors.push_back(item.value.tensor());
  return tensors;
}

int64_t bytes_of(const dcpp::StateDict& state) {
  int64_t total = 0;
  for (const auto& item : state) total += item.value.tensor().nbytes();
  return total;
}

// The copy engine's time for the state: copy_(non_blocking) into warm pinned buffers, one
// synchronize.
double copy_engine_seconds(const std::vector<at::Tensor>& sources, int repeat) {
  std::vector<at::Tensor> pinned;
  for (const at::Tensor& source : sources) {
    pinned.push_back(
        at::empty_like(source, at::TensorOptions().device(at::kCPU).pinned_memory(true)));
  }
  for (std::size_t i = 0; i < sources.size(); ++i) pinned[i].copy_(sources[i], true);
  synchronize();
  return bench::best_seconds(
      repeat, [] {},
      [&] {
        for (std::size_t i = 0; i < sources.size(); ++i) pinned[i].copy_(sources[i], true);
        synchronize();
      });
}

// ---- stage(): first against warm ----------------------------------------------------------------

struct StageTimes {
  double returned = 0;  // stage() returned
  double staged = 0;    // its future completed
};

StageTimes stage_once(dcpp::AsyncStager& stager, const dcpp::StateDict& state) {
  const auto start = Clock::now();
  auto future = stager.stage(state);
  StageTimes times;
  times.returned = seconds_since(start);
  future.wait();
  times.staged = seconds_since(start);
  return times;
}

StageTimes best_warm_stage(dcpp::AsyncStager& stager, const dcpp::StateDict& state, int repeat) {
  StageTimes best{1e30, 1e30};
  for (int run = 0; run < repeat; ++run) {
    const StageTimes times = stage_once(stager, state);
    best.returned = std::min(best.returned, times.returned);
    best.staged = std::min(best.staged, times.staged);
  }
  return best;
}

// ---- steps ------------------------------------------------------------------------------------

// Wall time of `steps` compute-bound training steps: a 4096x4096 matmul chain, synchronized once
// per step.
double step_seconds(int steps) {
  const at::Tensor a = at::randn({4096, 4096}, on_device(at::kFloat));
  at::Tensor b = at::randn({4096, 4096}, on_device(at::kFloat));
  synchronize();
  const auto start = Clock::now();
  for (int step = 0; step < steps; ++step) {
    for (int i = 0; i < 8; ++i) b = at::tanh(at::mm(a, b));
    synchronize();
  }
  return seconds_since(start) / steps;
}

// A launch-bound step: `kernels` tiny kernels (64x64 addmm, tanh), then one synchronize, as a loop
// that reads its loss does. The CPU's launch rate bounds it, not the GPU.
class SmallStep {
 public:
  explicit SmallStep(int kernels)
      : kernels_(kernels),
        w_(at::randn({64, 64}, on_device(at::kFloat)) * 0.1),
        b_(at::randn({64, 64}, on_device(at::kFloat)) * 0.1),
        x_(at::randn({64, 64}, on_device(at::kFloat))) {}
  double run() {
    const auto start = Clock::now();
    for (int i = 0; i < kernels_ / 2; ++i) x_ = at::tanh(at::addmm(b_, x_, w_));
    synchronize();
    return seconds_since(start);
  }

 private:
  int kernels_;
  at::Tensor w_, b_, x_;
};

struct StepStats {
  std::vector<double> samples;
  void add(double seconds) { samples.push_back(seconds); }
  std::size_t count() const { return samples.size(); }
  double mean() const {
    double total = 0;
    for (double s : samples) total += s;
    return samples.empty() ? 0 : total / static_cast<double>(samples.size());
  }
  double quantile(double q) const {
    if (samples.empty()) return 0;
    std::vector<double> sorted = samples;
    std::sort(sorted.begin(), sorted.end());
    const auto index = static_cast<std::size_t>(q * static_cast<double>(sorted.size() - 1));
    return sorted[index];
  }
};

void print_steps(const char* what, const StepStats& during, const StepStats& alone) {
  if (during.count() == 0) {
    std::printf("launch-bound step %s: no step ran in that phase\n", what);
    return;
  }
  std::printf(
      "launch-bound step %s: mean %.3f ms over %zu steps (%.3fx alone's %.3f ms), p50 %.3f ms "
      "(%.3fx), p99 %.3f ms (%.3fx)\n",
      what, during.mean() * 1e3, during.count(), during.mean() / alone.mean(), alone.mean() * 1e3,
      during.quantile(0.5) * 1e3, during.quantile(0.5) / alone.quantile(0.5),
      during.quantile(0.99) * 1e3, during.quantile(0.99) / alone.quantile(0.99));
}

std::shared_ptr<dcpp::AsyncStager> make_stager(const std::string& name) {
  if (name == "tbb") return dcpp::make_tbb_stager();
  return dcpp::make_blocking_stager();
}

dcpp::AsyncCheckpointerOptions checkpointer_options(std::shared_ptr<dcpp::AsyncStager> stager) {
  dcpp::AsyncCheckpointerOptions options;
  options.stager = std::move(stager);
  options.file_system.sync_files = false;
  return options;
}

// ---- A: the LLaMA-shaped state ---------------------------------------------------------------

void llama_measurements(const Options& options) {
  const dcpp::StateDict state = llama_state(options.layers, 4096, 11008);
  const int64_t bytes = bytes_of(state);
  const double state_gib = static_cast<double>(bytes) / kGiB;
  std::printf("A. LLaMA-7B-shaped state: %d layers, %zu bf16 tensors, %.3f GiB\n", options.layers,
              state.size(), state_gib);

  // 1-2. First stage() against warm, and the pinned memory it takes. The allocator starts empty.
  empty_host_cache();
  for (const std::string name : {"tbb", "blocking"}) {
    const PinnedNow before = pinned_now();
    std::shared_ptr<dcpp::AsyncStager> stager = make_stager(name);
    const StageTimes first = stage_once(*stager, state);
    const PinnedNow after_first = pinned_now();
    const StageTimes warm = best_warm_stage(*stager, state, options.repeat);
    std::printf(
        "first stage(), %s stager: returned in %.1f ms, staged in %.1f ms; warm: returned in "
        "%.1f ms, staged in %.1f ms (first/warm: %.2fx to return, %.2fx to staged)\n",
        name.c_str(), first.returned * 1e3, first.staged * 1e3, warm.returned * 1e3,
        warm.staged * 1e3, first.returned / warm.returned, first.staged / warm.staged);
    const std::string when = "after the first stage(), " + name + " stager";
    print_pinned(when.c_str(), stager->staging_bytes(), before, after_first, rounded_bytes(state));
    if (name == "tbb") {
      // A change of structure: LLaMA-13B's shapes, two layers. The stager drops the old buffers
      // (libtorch's host allocator, where the buffers are its blocks, keeps them cached).
      const dcpp::StateDict other = llama_state(2, 5120, 13824);
      stager->stage(other).wait();
      const std::string changed =
          "after a structure change (2 LLaMA-13B layers, " + gib(bytes_of(other)) + "), tbb stager";
      print_pinned(changed.c_str(), stager->staging_bytes(), before, pinned_now(),
                   rounded_bytes(other));
      stager.reset();
      print_pinned("after the tbb stager is destroyed", 0, before, pinned_now(), 0);
    }
    stager.reset();
    empty_host_cache();
  }
  const std::vector<at::Tensor> sources = tensors_of(state);
  const double copy_engine = copy_engine_seconds(sources, options.repeat);
  std::printf(
      "copy engine for this state: copy_(non_blocking) into warm pinned %.1f ms, %.2f GiB/s "
      "(the baseline of the lines below)\n",
      copy_engine * 1e3, state_gib / copy_engine);
  empty_host_cache();

  // 3. async_save: to return, to staged, to committed.
  for (const std::string name : {"tbb", "blocking"}) {
    dcpp::AsyncCheckpointer checkpointer(checkpointer_options(make_stager(name)));
    // The first save allocates the buffers (measured above); the timed ones reuse them.
    const fs::path warmup = options.dir / ("llama-warmup-" + name);
    checkpointer.async_save(state, warmup.string()).committed.wait();
    remove_checkpoint(warmup);
    double returned = 1e30, staged = 1e30, committed = 1e30;
    for (int run = 0; run < options.repeat; ++run) {
      const fs::path path = options.dir / ("llama-" + name + std::to_string(run));
      const auto start = Clock::now();
      dcpp::AsyncSaveResponse response = checkpointer.async_save(state, path.string());
      returned = std::min(returned, seconds_since(start));
      response.staged.wait();
      staged = std::min(staged, seconds_since(start));
      response.committed.wait();
      committed = std::min(committed, seconds_since(start));
      remove_checkpoint(path);
    }
    std::printf(
        "async_save, %s stager: returned in %.1f ms (%.2fx the copy engine's time), staged in "
        "%.1f ms (%.2fx), committed in %.1f ms (%.2fx; %.2f GiB/s)\n",
        name.c_str(), returned * 1e3, returned / copy_engine, staged * 1e3, staged / copy_engine,
        committed * 1e3, committed / copy_engine, state_gib / committed);
  }
  empty_host_cache();

  // 4. Launch-bound steps during a background save, by phase, against the same steps alone.
  SmallStep step(options.small_kernels);
  for (int i = 0; i < 20; ++i) step.run();  // warm-up: cuBLAS handles, the caching allocator
  StepStats alone, staging, writing;
  {
    dcpp::AsyncCheckpointer checkpointer(checkpointer_options(make_stager("tbb")));
    const fs::path warmup = options.dir / "llama-steps-warmup";
    checkpointer.async_save(state, warmup.string()).committed.wait();  // buffers allocated
    remove_checkpoint(warmup);
    for (int run = 0; run < options.repeat; ++run) {
      const fs::path path = options.dir / ("llama-steps" + std::to_string(run));
      dcpp::AsyncSaveResponse response = checkpointer.async_save(state, path.string());
      while (!response.committed.is_ready()) {
        const bool was_staging = !response.staged.is_ready();
        (was_staging ? staging : writing).add(step.run());
      }
      response.committed.wait();
      remove_checkpoint(path);
    }
  }
  const std::size_t alone_steps = std::max<std::size_t>(200, staging.count() + writing.count());
  for (std::size_t i = 0; i < alone_steps; ++i) alone.add(step.run());
  StepStats during = staging;
  for (double s : writing.samples) during.add(s);
  std::printf(
      "launch-bound step alone (%d tiny kernels, one synchronize): mean %.3f ms over %zu "
      "steps, p50 %.3f ms, p99 %.3f ms (the baseline of the lines below)\n",
      options.small_kernels, alone.mean() * 1e3, alone.count(), alone.quantile(0.5) * 1e3,
      alone.quantile(0.99) * 1e3);
  print_steps("during a background save (tbb stager)", during, alone);
  print_steps("while it stages", staging, alone);
  print_steps("while it writes", writing, alone);
  empty_host_cache();
}

// ---- B: the flat float state (issue 39) -------------------------------------------------------

void flat_measurements(const Options& options) {
  std::printf("B. flat state: %.2f GiB in %d float tensors\n", options.gib, options.tensors);
  const dcpp::StateDict state = flat_state(options);
  const std::vector<at::Tensor> sources = tensors_of(state);

  // 1. Staging throughput.
  const double copy_engine = copy_engine_seconds(sources, options.repeat);
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
      options.gib / copy_engine, options.gib / to_cpu, options.gib / staged, staged / copy_engine);

  // 2. async_save's blocking time.
  for (const std::string name : {"tbb", "blocking"}) {
    dcpp::AsyncCheckpointer checkpointer(
        checkpointer_options(name == "tbb" ? tbb : make_stager(name)));
    double blocking = 1e30;
    for (int run = 0; run < options.repeat; ++run) {
      const fs::path path = options.dir / (name + std::to_string(run));
      const auto start = Clock::now();
      dcpp::AsyncSaveResponse response = checkpointer.async_save(state, path.string());
      blocking = std::min(blocking, seconds_since(start));
      response.committed.wait();
      remove_checkpoint(path);
    }
    std::printf("async_save blocking time, %s stager: %.1f ms (%.2fx the copy engine's time)\n",
                name.c_str(), blocking * 1e3, blocking / copy_engine);
  }

  // 3. Step time with a background save.
  const double alone = step_seconds(options.steps);
  double during = 0;
  {
    dcpp::AsyncCheckpointer checkpointer(checkpointer_options(tbb));
    const fs::path path = options.dir / "during";
    dcpp::AsyncSaveResponse response = checkpointer.async_save(state, path.string());
    during = step_seconds(options.steps);
    response.committed.wait();
    remove_checkpoint(path);
  }
  std::printf("step time: %.2f ms alone, %.2f ms during a background save (%.3fx)\n", alone * 1e3,
              during * 1e3, during / alone);
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  CLI::App app("Checkpointing from a GPU: staging, async_save, step time", "cuda_staging_bench");
  app.add_option("--gib", options.gib, "size of the flat state on the device, GiB (part B)");
  app.add_option("--tensors", options.tensors, "tensors the flat state is split into (part B)");
  app.add_option("--repeat", options.repeat, "runs of each timing; the best counts");
  app.add_option("--steps", options.steps, "compute-bound steps per step-time measurement (B)");
  app.add_option("--layers", options.layers, "LLaMA-7B decoder layers in the state of part A");
  app.add_option("--small-kernels", options.small_kernels,
                 "tiny kernels in each launch-bound step (part A)");
  app.add_option("--dir", options.dir, "where the background saves write (removed at exit)");
  bench::parse_or_exit(app, argc, argv);
  if (!torch::cuda::is_available()) {
    std::printf("cuda_staging_bench: no CUDA device visible; nothing to measure\n");
    return 77;
  }
  const RemoveAtExit remove_dir{options.dir};
  try {
    std::printf("device: %s; libtorch %d.%d\n", at::cuda::getCurrentDeviceProperties()->name,
                TORCH_VERSION_MAJOR, TORCH_VERSION_MINOR);
    fs::remove_all(options.dir);
    fs::create_directories(options.dir);
    // The CUDA context and cuBLAS made before anything is timed.
    at::mm(at::randn({64, 64}, on_device(at::kFloat)), at::randn({64, 64}, on_device(at::kFloat)));
    synchronize();
    llama_measurements(options);
    flat_measurements(options);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "cuda_staging_bench: %s\n", error.what());
    return 1;
  }
  return 0;
}
