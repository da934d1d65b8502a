#include "core/group_reach.h"

namespace dcpp::detail {

at::Device wire_device(const GroupReach& reach, at::Device tensor_device, bool point_to_point,
                       at::Device message_device) {
  if (tensor_device.is_cpu()) {
    return reach.cpu ? tensor_device : message_device;
  }
  if (tensor_device.is_cuda()) {
    const bool taken = point_to_point ? reach.cuda_point_to_point : reach.cuda;
    return taken ? tensor_device : at::Device(at::kCPU);
  }
  return tensor_device;
}

}  // namespace dcpp::detail
