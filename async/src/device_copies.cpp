#include "device_copies.h"

#ifdef DCPP_WITH_CUDA
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <map>
#include <vector>
#else
#include <stdexcept>
#endif

namespace dcpp::detail {

#ifdef DCPP_WITH_CUDA

struct DeviceCopies::State {
  std::map<c10::DeviceIndex, c10::cuda::CUDAStream> streams;
  std::vector<at::cuda::CUDAEvent> done;  // by index; reused from one stage to the next
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
}

bool DeviceCopies::handles(const at::Tensor& tensor) { return tensor.is_cuda(); }

void DeviceCopies::enqueue(std::size_t index, const at::Tensor& source, const at::Tensor& pinned) {
  const c10::DeviceIndex device = source.device().index();
  auto found = state_->streams.find(device);
  if (found == state_->streams.end()) {
    found = state_->streams
                .emplace(device, c10::cuda::getStreamFromPool(/*isHighPriority=*/false, device))
                .first;
  }
  const c10::cuda::CUDAStream& stream = found->second;
  if (state_->done.size() <= index) {
    state_->done.resize(index + 1);
  }
  // The copy starts after what the caller queued before stage() (the values it asked to save).
  at::cuda::CUDAEvent queued;
  queued.record(c10::cuda::getCurrentCUDAStream(device));
  queued.block(stream);
  {
    const c10::cuda::CUDAStreamGuard on_stream(stream);
    pinned.copy_(source, /*non_blocking=*/true);
  }
  source.record_stream(stream);
  state_->done[index].record(stream);
}

void DeviceCopies::wait(std::size_t index) { state_->done.at(index).synchronize(); }

#else  // no CUDA in this libtorch: nothing is handled here

struct DeviceCopies::State {};

DeviceCopies::DeviceCopies() = default;
DeviceCopies::~DeviceCopies() = default;

bool DeviceCopies::handles(const at::Tensor&) { return false; }

void DeviceCopies::enqueue(std::size_t, const at::Tensor&, const at::Tensor&) {
  throw std::logic_error("DeviceCopies::enqueue in a build of dcpp without CUDA");
}

void DeviceCopies::wait(std::size_t) {
  throw std::logic_error("DeviceCopies::wait in a build of dcpp without CUDA");
}

#endif

}  // namespace dcpp::detail
