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
#include <dcpp/parallel/pipeline_stage.h>
#include <dcpp/plugin/checkpoint_manager.h>
#include <dcpp/state_dict/model_state_dict.h>

#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/Sleep.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/cuda.h>
#include <torch/nn/modules/linear.h>

#include <memory>
#include <string>
#include <vector>

#include <unistd.h>

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
  StateDict state;
  state.insert("weight", weight);
  for (const std::string kind : {"tbb", "blocking"}) {
    INFO(kind << " stager");
    const std::shared_ptr<dcpp::AsyncStager> stager =
        kind == "tbb" ? std::shared_ptr<dcpp::AsyncStager>(dcpp::make_tbb_stager())
                      : dcpp::make_blocking_stager();
    stager->stage(state).wait();  // the pinned buffers, allocated before the work below
    training.synchronize();
    weight.zero_();
    // About a second of a kernel that only waits, then the values: without the stager's event
    // on this stream, its copy would run at once and read the zeros.
    at::cuda::sleep(int64_t{1} << 31);
    weight.add_(20.0);
    const StateDict staged = stager->stage(state).get();
    const at::Tensor copy = staged.at("weight").tensor();
    CHECK(copy.device().is_cpu());
    CHECK(copy.is_pinned());
    CHECK(dcpp::test::bitwise_equal(copy, at::full({4096, 1024}, 20.0)));

    // The buffers are reused: a second stage writes into the same pinned memory.
    weight.add_(1.0);
    const StateDict again = stager->stage(state).get();
    CHECK(again.at("weight").tensor().data_ptr() == copy.data_ptr());
    CHECK(dcpp::test::bitwise_equal(again.at("weight").tensor(), at::full({4096, 1024}, 21.0)));
  }
}

TEST_CASE("a tensor that moves to another GPU between stages stages from there") {
  REQUIRE_CUDA_DEVICE();
  if (torch::cuda::device_count() < 2) DCPP_SKIP_BECAUSE("one CUDA device: nothing to move to");
  auto stager = dcpp::make_tbb_stager();
  StateDict state;
  state.insert("weight", at::full({1000}, 1.0, at::TensorOptions().device(at::kCUDA, 0)));
  CHECK(dcpp::test::bitwise_equal(stager->stage(state).get().at("weight").tensor(),
                                  at::full({1000}, 1.0)));
  state.insert_or_assign("weight", at::full({1000}, 2.0, at::TensorOptions().device(at::kCUDA, 1)));
  CHECK(dcpp::test::bitwise_equal(stager->stage(state).get().at("weight").tensor(),
                                  at::full({1000}, 2.0)));
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

TEST_CASE(
    "a checkpoint manager and an async checkpointer message through an NCCL-only group on "
    "the device") {
  REQUIRE_CUDA_DEVICE();
  if (!dcpp::nccl_available()) DCPP_SKIP_BECAUSE("this libtorch has CUDA but no NCCL");
  // One rank: NCCL takes one rank per GPU. The manager's agreements and the save's messages are
  // CPU values; through this group they travel on the device (a CPU tensor is refused: "No
  // backend type associated with device type cpu").
  c10::intrusive_ptr<c10d::Store> store = c10::make_intrusive<c10d::HashStore>();
  const auto nccl = dcpp::make_nccl_process_group(store, 0, 1, dcpp::ProcessGroupOptions());
  dcpp::test::TempDir dir;
  StateDict state;
  state.insert("weight", at::randn({64, 32}, at::kCUDA));
  state.insert("steps", at::arange(10, at::kLong));
  {
    dcpp::CheckpointManager manager(dcpp::CheckpointManagerOptions()
                                        .with_root(dir.path() / "managed")
                                        .with_async(true)
                                        .with_process_group(nccl));
    dcpp::SaveRequest request;
    request.step = 3;
    manager.save(state, request);
    manager.wait();
    StateDict restored = zeros_like(state, at::kCUDA);
    REQUIRE(manager.restore(restored));
    require_equal_on(restored, state, c10::Device(at::kCUDA, 0));
  }
  {
    dcpp::AsyncCheckpointer checkpointer(dcpp::AsyncCheckpointerOptions().with_process_group(nccl));
    checkpointer.async_save(state, (dir.path() / "async").string()).committed.wait();
    StateDict loaded = zeros_like(state, at::kCPU);
    dcpp::load(loaded, dir.path() / "async");
    require_equal_on(loaded, state, at::kCPU);
  }
}

TEST_CASE("pipeline stages of CUDA modules pass activations and gradients over Gloo") {
  REQUIRE_CUDA_DEVICE();
  auto model_on_gpu = [] {
    torch::manual_seed(59);
    torch::nn::Sequential model(torch::nn::Linear(16, 32), torch::nn::Linear(32, 8));
    model->to(at::kCUDA);
    return model;
  };
  torch::nn::Sequential whole = model_on_gpu();
  const at::Tensor input = at::randn({4, 16}, at::kCUDA);
  const at::Tensor expected = whole->forward(input);
  expected.sum().backward();
  std::vector<at::Tensor> outputs(2);
  std::vector<at::Tensor> first_grads(2);
  dcpp::test::on_ranks(2, "cuda-pipeline", [&](int rank, const auto& group) {
    torch::nn::Sequential model = model_on_gpu();
    dcpp::PipelineStage stage(dcpp::PipelineStage::slice(model, rank, rank + 1), rank, group);
    outputs[rank] = stage.forward(rank == 0 ? input : at::Tensor());
    stage.backward(rank == 1 ? outputs[rank].sum() : at::Tensor());
    first_grads[rank] = model->parameters()[0].grad();
  });
  REQUIRE(outputs[1].is_cuda());
  CHECK(dcpp::test::bitwise_equal(outputs[1].detach().cpu(), expected.detach().cpu()));
  REQUIRE(first_grads[0].defined());
  CHECK(dcpp::test::bitwise_equal(first_grads[0].cpu(), whole->parameters()[0].grad().cpu()));
}

TEST_CASE("a save's writer threads and a load's reader threads follow the caller's stream") {
  REQUIRE_CUDA_DEVICE();
  // The caller's stream is a non-blocking one: the legacy default stream, where helper threads
  // would copy otherwise, does not wait for its work.
  const c10::cuda::CUDAStream training = c10::cuda::getStreamFromPool(false, 0);
  const c10::cuda::CUDAStreamGuard on_training(training);
  StateDict state;
  for (int i = 0; i < 4; ++i) {
    state.insert("w" + std::to_string(i), at::zeros({1024, 256}, at::kCUDA));
  }
  at::cuda::sleep(int64_t{1} << 31);  // about a second, then the values
  for (int i = 0; i < 4; ++i) state.at("w" + std::to_string(i)).tensor().fill_(i + 1);
  dcpp::test::TempDir dir;
  dcpp::SaveOptions options = unsynced();
  options.file_system.thread_count = 4;
  dcpp::save(state, dir.path(), options);
  StateDict loaded;
  for (int i = 0; i < 4; ++i) {
    loaded.insert("w" + std::to_string(i), at::zeros({1024, 256}, at::kCUDA));
  }
  dcpp::load(
      loaded, dir.path(),
      dcpp::LoadOptions().with_file_system(dcpp::FileSystemReaderOptions().with_thread_count(4)));
  for (int i = 0; i < 4; ++i) {
    INFO("w" << i);
    const at::Tensor got = loaded.at("w" + std::to_string(i)).tensor();
    CHECK(dcpp::test::bitwise_equal(got.cpu(), at::full({1024, 256}, i + 1.0)));
  }
}

TEST_CASE("the memory tier's copier copies what the training stream computed before the save") {
  REQUIRE_CUDA_DEVICE();
  const c10::cuda::CUDAStream training = c10::cuda::getStreamFromPool(false, 0);
  const c10::cuda::CUDAStreamGuard on_training(training);
  const std::string job = "cuda-copier-" + std::to_string(::getpid());
  dcpp::test::TempDir dir;
  StateDict state;
  state.insert("weight", at::zeros({2048, 512}, at::kCUDA));
  at::cuda::sleep(int64_t{1} << 31);  // about a second, then the values the save must copy
  state.at("weight").tensor().fill_(7.0);
  {
    dcpp::CheckpointManager manager(dcpp::CheckpointManagerOptions()
                                        .with_root(dir.path())
                                        .with_async(false)
                                        .with_memory(dcpp::MemoryTierOptions()
                                                         .with_every_steps(1)
                                                         .with_job(job)
                                                         .with_copy_while_training(true)));
    dcpp::SaveRequest request;
    request.step = 1;
    manager.save(state, request);
    manager.wait_for_memory_copy();
    StateDict restored = zeros_like(state, at::kCPU);
    REQUIRE(manager.restore(restored));
    CHECK(dcpp::test::bitwise_equal(restored.at("weight").tensor(), at::full({2048, 512}, 7.0)));
    manager.release_memory();
  }
}
