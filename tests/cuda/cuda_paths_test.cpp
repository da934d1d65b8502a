// dcpp's CUDA paths (docs/gpu.md), built where libtorch has CUDA (tests/CMakeLists.txt) and run
// where a CUDA device is: every case skips, saying so, on a machine without one.

#include "dcpp_test.h"
#include "rank_threads.h"

#include <dcpp/async/async_checkpointer.h>
#include <dcpp/async/blocking_stager.h>
#include <dcpp/async/tbb_stager.h>
#include <dcpp/checkpoint/checkpointer.h>
#include <dcpp/dist/device_mesh.h>
#include <dcpp/parallel/data_parallel.h>
#include <dcpp/state_dict/model_state_dict.h>

#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/cuda.h>
#include <torch/nn/modules/linear.h>

#include <memory>
#include <string>
#include <vector>

using dcpp::StateDict;

namespace {

// Skips the calling test case, with the reason, where no CUDA device is visible (Catch2 v3: a
// skipped case, and a file of skipped cases exits 4, which ctest counts as skipped; v2 has no
// skipping: a warning, and the case ends).
#ifdef DCPP_CATCH2_V3
#define DCPP_SKIP_BECAUSE(reason) SKIP(reason)
#else
#define DCPP_SKIP_BECAUSE(reason) \
  do {                            \
    WARN(reason);                 \
    return;                       \
  } while (false)
#endif
#define REQUIRE_CUDA_DEVICE()                                                                 \
  do {                                                                                        \
    if (!torch::cuda::is_available()) {                                                       \
      DCPP_SKIP_BECAUSE(                                                                      \
          "no CUDA device visible: the CUDA paths are compiled in, and tested where one is"); \
    }                                                                                         \
  } while (false)

dcpp::SaveOptions unsynced() {
  dcpp::SaveOptions options;
  options.file_system.sync_files = false;
  return options;
}

// A state of every dtype dcpp stages, on the CUDA device, and a non-contiguous view.
StateDict cuda_state() {
  const auto on_gpu = at::TensorOptions().device(at::kCUDA);
  StateDict state;
  state.insert("weight", at::randn({257, 129}, on_gpu));
  state.insert("half", at::randn({1000}, on_gpu.dtype(at::kHalf)));
  state.insert("bf16", at::randn({33, 7}, on_gpu.dtype(at::kBFloat16)));
  state.insert("steps", at::randint(0, 1 << 20, {17}, on_gpu.dtype(at::kLong)));
  state.insert("transposed", at::randn({64, 48}, on_gpu).t());
  state.insert("step", int64_t{42});
  return state;
}

StateDict zeros_like(const StateDict& state, c10::Device device) {
  StateDict zeros;
  for (const auto& item : state) {
    if (item.value.is_tensor()) {
      zeros.insert(item.key,
                   at::zeros_like(item.value.tensor(), at::TensorOptions().device(device)));
    } else {
      zeros.insert(item.key, item.value);
    }
  }
  return zeros;
}

// Every tensor of `loaded` equals `expected`'s bit for bit, on `device`.
void require_equal_on(const StateDict& loaded, const StateDict& expected, c10::Device device) {
  for (const auto& item : expected) {
    if (!item.value.is_tensor()) continue;
    INFO(item.key);
    const at::Tensor got = loaded.at(item.key).tensor();
    REQUIRE(got.device() == device);
    REQUIRE(dcpp::test::bitwise_equal(got.cpu(), item.value.tensor().cpu()));
  }
}

}  // namespace

TEST_CASE("a state dict on CUDA saved through each stager loads on the CPU and back, bit for bit") {
  REQUIRE_CUDA_DEVICE();
  const StateDict state = cuda_state();
  for (const std::string stager : {"blocking", "tbb"}) {
    INFO(stager << " stager");
    dcpp::test::TempDir dir;
    {
      dcpp::AsyncCheckpointerOptions options;
      options.stager = stager == "tbb" ? std::shared_ptr<dcpp::AsyncStager>(dcpp::make_tbb_stager())
                                       : dcpp::make_blocking_stager();
      options.file_system.sync_files = false;
      dcpp::AsyncCheckpointer checkpointer(std::move(options));
      dcpp::AsyncSaveResponse response =
          checkpointer.async_save(state, (dir.path() / "gpu").string());
      response.committed.wait();
    }
    StateDict on_cpu = zeros_like(state, at::kCPU);
    dcpp::load(on_cpu, dir.path() / "gpu");
    require_equal_on(on_cpu, state, at::kCPU);

    // ... saved again from the CPU, loaded onto CUDA tensors (through pinned buffers).
    dcpp::save(on_cpu, dir.path() / "cpu", unsynced());
    StateDict on_gpu = zeros_like(state, at::kCUDA);
    dcpp::load(on_gpu, dir.path() / "cpu");
    require_equal_on(on_gpu, state, c10::Device(at::kCUDA, 0));
  }
}

TEST_CASE("staging from CUDA copies what the caller's stream computed, into pinned buffers") {
  REQUIRE_CUDA_DEVICE();
  // The caller computes on a stream of its own; stage() must copy after that work, without the
  // caller synchronising it.
  const c10::cuda::CUDAStream training = c10::cuda::getStreamFromPool(false, 0);
  const c10::cuda::CUDAStreamGuard on_training(training);
  at::Tensor weight = at::zeros({4096, 1024}, at::TensorOptions().device(at::kCUDA));
  for (int i = 0; i < 20; ++i) weight.add_(1.0);  // queued on `training`, not yet done
  StateDict state;
  state.insert("weight", weight);
  auto stager = dcpp::make_tbb_stager();
  StateDict staged = stager->stage(state).get();
  const at::Tensor copy = staged.at("weight").tensor();
  CHECK(copy.device().is_cpu());
  CHECK(copy.is_pinned());
  CHECK(dcpp::test::bitwise_equal(copy, at::full({4096, 1024}, 20.0)));

  // The buffers are reused: a second stage writes into the same pinned memory.
  weight.add_(1.0);
  StateDict again = stager->stage(state).get();
  CHECK(again.at("weight").tensor().data_ptr() == copy.data_ptr());
  CHECK(dcpp::test::bitwise_equal(again.at("weight").tensor(), at::full({4096, 1024}, 21.0)));
}

TEST_CASE("replicated CUDA tensors are checked, and read once, through host copies over Gloo") {
  REQUIRE_CUDA_DEVICE();
  constexpr int kRanks = 2;
  const at::Tensor weight = at::randn({300, 40});
  dcpp::test::TempDir dir;
  std::vector<at::Tensor> loaded(kRanks);
  dcpp::test::on_ranks(
      kRanks, "cuda-replicas", [&](int rank, const c10::intrusive_ptr<c10d::ProcessGroup>& group) {
        // Both ranks save the same tensor from the device: the replica check
        // compares their copies' checksums, computed on host copies.
        StateDict state;
        state.insert("weight", weight.to(at::kCUDA));
        dcpp::save(state, dir.path(), unsynced().with_process_group(group));
        StateDict into;
        into.insert("weight", at::zeros({300, 40}, at::kCUDA));
        dcpp::load(
            into, dir.path(),
            dcpp::LoadOptions().with_process_group(group).with_read_once(dcpp::ReadOnce::kAlways));
        loaded[rank] = into.at("weight").tensor();
      });
  for (int rank = 0; rank < kRanks; ++rank) {
    INFO("rank " << rank);
    REQUIRE(loaded[rank].is_cuda());
    REQUIRE(dcpp::test::bitwise_equal(loaded[rank].cpu(), weight));
  }
}

TEST_CASE("a DeviceMesh trains over NCCL and checkpoints over Gloo beside it") {
  REQUIRE_CUDA_DEVICE();
  if (!dcpp::nccl_available()) DCPP_SKIP_BECAUSE("this libtorch has CUDA but no NCCL");
  c10::intrusive_ptr<c10d::Store> store = c10::make_intrusive<c10d::HashStore>();
  dcpp::DeviceMesh mesh(store, 0, 1, {1}, {"dp"},
                        dcpp::ProcessGroupOptions().with_gloo_hostname("127.0.0.1"),
                        dcpp::TrainingBackend::kNccl);
  CHECK(mesh.training_group("dp") != mesh.group("dp"));
  std::vector<at::Tensor> grads{at::full({8}, 3.0, at::kCUDA)};
  mesh.training_group("dp")->allreduce(grads)->wait();
  CHECK(dcpp::test::bitwise_equal(grads[0].cpu(), at::full({8}, 3.0)));

  dcpp::test::TempDir dir;
  StateDict state;
  state.insert("grads", grads[0]);
  dcpp::save(state, dir.path(), unsynced().with_process_group(mesh.group("dp")));
  StateDict loaded;
  loaded.insert("grads", at::zeros({8}, at::kCUDA));
  dcpp::load(loaded, dir.path(), dcpp::LoadOptions().with_process_group(mesh.group("dp")));
  CHECK(dcpp::test::bitwise_equal(loaded.at("grads").tensor().cpu(), at::full({8}, 3.0)));

  // A layout training over the NCCL group, its model checkpointed over the Gloo one.
  auto linear = std::make_shared<torch::nn::LinearImpl>(6, 3);
  linear->to(at::kCUDA);
  dcpp::DataParallel ddp(linear, mesh.training_group("dp"));
  ddp.module().as<torch::nn::LinearImpl>()->forward(at::ones({2, 6}, at::kCUDA)).sum().backward();
  ddp.synchronize_gradients();
  const StateDict model = dcpp::get_model_state_dict(ddp);
  dcpp::save(model, dir.path() / "model", unsynced().with_process_group(mesh.group("dp")));
  StateDict model_on_cpu;
  for (const auto& item : model) {
    model_on_cpu.insert(item.key, at::zeros_like(item.value.tensor(), at::kCPU));
  }
  dcpp::load(model_on_cpu, dir.path() / "model");
  CHECK(dcpp::test::bitwise_equal(model_on_cpu.at("weight").tensor(), linear->weight.cpu()));
  CHECK(dcpp::test::bitwise_equal(model_on_cpu.at("bias").tensor(), linear->bias.cpu()));
}
