#include "device_copies.h"

#include <unistd.h>

#ifdef DCPP_WITH_CUDA
#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <c10/util/accumulate.h>

#include <cstdlib>
#include <map>
#include <new>
#include <vector>

#else
#include <stdexcept>
#endif

namespace dcpp::detail {

int64_t DeviceCopies::pinned_length(int64_t bytes) {
  const auto page = static_cast<int64_t>(::sysconf(_SC_PAGESIZE));
  return (bytes + page - 1) / page * page;
}

#ifdef DCPP_WITH_CUDA

namespace {

// Threads that wait on these events sleep instead of spinning; no timing is taken.
constexpr unsigned kEventFlags = cudaEventBlockingSync | cudaEventDisableTiming;

}  // namespace

struct DeviceCopies::State {
  std::map<c10::DeviceIndex, c10::cuda::CUDAStream> streams;
  std::map<c10::DeviceIndex, at::cuda::CUDAEvent> queued;  // the caller's stream, per device
  // By index; reused from one stage to the next while buffer `index` copies from the same device
  // (an event is bound to the device it first recorded on).
  std::vector<at::cuda::CUDAEvent> done;
  std::vector<cudaStream_t> owned;  // the streams above, destroyed with this
};

DeviceCopies::DeviceCopies() : state_(std::make_unique<State>()) {}

// A copy still in flight (a stage abandoned after an error) completes before its buffers go.
DeviceCopies::~DeviceCopies() {
  for (auto& [device, stream] : state_->streams) {
    try {
      stream.synchronize();
    } catch (...) {  // a device lost: nothing left to wait for
    }
  }
  for (cudaStream_t own : state_->owned) {
    (void)cudaStreamDestroy(own);
  }
}

bool DeviceCopies::handles(const at::Tensor& tensor) { return tensor.is_cuda(); }

at::Tensor DeviceCopies::pinned_buffer(at::ScalarType dtype, const std::vector<int64_t>& sizes) {
  const auto options = at::TensorOptions().dtype(dtype).device(at::kCPU);
  const int64_t bytes =
      c10::multiply_integers(sizes) * static_cast<int64_t>(c10::elementSize(dtype));
  if (bytes == 0) return at::empty(sizes, options);
  const auto length = static_cast<std::size_t>(pinned_length(bytes));
  void* memory = std::aligned_alloc(static_cast<std::size_t>(::sysconf(_SC_PAGESIZE)), length);
  if (memory == nullptr) throw std::bad_alloc();
  const cudaError_t registered = cudaHostRegister(memory, length, cudaHostRegisterDefault);
  if (registered != cudaSuccess) {
    std::free(memory);
    C10_CUDA_CHECK(registered);
  }
  return at::from_blob(
      memory, sizes,
      [](void* data) {
        (void)cudaHostUnregister(data);
        std::free(data);
      },
      options);
}

void DeviceCopies::enqueue(std::size_t index, const at::Tensor& source, const at::Tensor& pinned) {
  const c10::DeviceIndex device = source.device().index();
  auto found = state_->streams.find(device);
  if (found == state_->streams.end()) {
    // A stream of its own, not one of libtorch's pool, which NCCL and the training loop draw
    // from too: the copies never queue behind their work, nor theirs behind the copies.
    const c10::cuda::CUDAGuard on_device(device);
    cudaStream_t own = nullptr;
    C10_CUDA_CHECK(cudaStreamCreateWithFlags(&own, cudaStreamNonBlocking));
    state_->owned.push_back(own);
    found = state_->streams.emplace(device, c10::cuda::getStreamFromExternal(own, device)).first;
  }
  const c10::cuda::CUDAStream& stream = found->second;
  while (state_->done.size() <= index) {
    state_->done.emplace_back(kEventFlags);
  }
  at::cuda::CUDAEvent& done = state_->done[index];
  if (done.isCreated() && done.device_index() != device) {
    done = at::cuda::CUDAEvent(kEventFlags);  // the tensor moved to another device
  }
  // The copy starts after what the caller queued before stage() (the values it asked to save).
  at::cuda::CUDAEvent& queued = state_->queued.try_emplace(device, kEventFlags).first->second;
  queued.record(c10::cuda::getCurrentCUDAStream(device));
  queued.block(stream);
  {
    const c10::cuda::CUDAStreamGuard on_stream(stream);
    const at::NoGradGuard no_grad;
    pinned.copy_(source, /*non_blocking=*/true);
  }
  source.record_stream(stream);
  done.record(stream);
}

void DeviceCopies::wait(std::size_t index) {
  at::cuda::CUDAEvent& done = state_->done.at(index);
  if (!done.isCreated()) return;  // never recorded: nothing to wait for
  // On the event's own device: a TBB thread's current device is whatever it last had (or 0), and
  // a wait there must not create a context on another GPU.
  const c10::cuda::CUDAGuard on_device(done.device_index());
  done.synchronize();
}

#else  // no CUDA in this libtorch: nothing is handled here

struct DeviceCopies::State {};

DeviceCopies::DeviceCopies() = default;
DeviceCopies::~DeviceCopies() = default;

bool DeviceCopies::handles(const at::Tensor&) { return false; }

at::Tensor DeviceCopies::pinned_buffer(at::ScalarType, const std::vector<int64_t>&) {
  throw std::logic_error("DeviceCopies::pinned_buffer in a build of dcpp without CUDA");
}

void DeviceCopies::enqueue(std::size_t, const at::Tensor&, const at::Tensor&) {
  throw std::logic_error("DeviceCopies::enqueue in a build of dcpp without CUDA");
}

void DeviceCopies::wait(std::size_t) {
  throw std::logic_error("DeviceCopies::wait in a build of dcpp without CUDA");
}

#endif

}  // namespace dcpp::detail
