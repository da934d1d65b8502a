#include "core/caller_streams.h"

#include <c10/core/DeviceGuard.h>
#include <c10/core/StreamGuard.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

namespace dcpp::detail {

CallerStreams::CallerStreams(Order order) {
  // Registered where libtorch has CUDA; without a device, a count of 0 (deviceCount never throws).
  if (!c10::impl::hasDeviceGuardImpl(c10::DeviceType::CUDA)) return;
  const c10::impl::DeviceGuardImplInterface* cuda =
      c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA);
  if (cuda->deviceCount() <= 0) return;
  stream_ = cuda->getStream(cuda->getDevice());
  if (order == Order::kAfterCallersWork) {
    queued_ = std::make_unique<c10::Event>(c10::DeviceType::CUDA);
    queued_->record(*stream_);
  }
}

CallerStreams::~CallerStreams() = default;

void CallerStreams::run_with(const std::function<void()>& body) const {
  if (!stream_) {
    body();
    return;
  }
  const c10::DeviceGuard on_device(stream_->device());
  c10::Stream stream = *stream_;
  if (queued_) {
    stream = c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA)
                 ->getStreamFromGlobalPool(stream_->device(), /*isHighPriority=*/false);
    queued_->block(stream);
  }
  const c10::StreamGuard on_stream(stream);
  body();
}

}  // namespace dcpp::detail
