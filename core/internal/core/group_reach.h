#pragma once
// Which devices' tensors a process group's calls take, and so the device each tensor GroupCalls
// hands it travels on. c10d takes a tensor only on a device its group has a backend for: an
// NCCL-only group refuses CPU tensors ("No backend type associated with device type cpu"), and
// Gloo's send and recv take CPU tensors only (its collectives take CUDA tensors too).

#include <ATen/core/Tensor.h>

namespace dcpp::detail {

struct GroupReach {
  bool cpu = true;                   // its collectives and send/recv take CPU tensors
  bool cuda = false;                 // its collectives take CUDA tensors
  bool cuda_point_to_point = false;  // its send and recv take CUDA tensors
};

/// The device a tensor on `tensor_device` travels on through a group of `reach`: its own where the
/// group takes it for this kind of call; else a CPU tensor travels on `message_device` (the group's
/// CUDA device, for an NCCL-only group) and a CUDA tensor on the CPU. A device the group has no
/// rule for (meta, ...) stays: c10d's own refusal then names it.
at::Device wire_device(const GroupReach& reach, at::Device tensor_device, bool point_to_point,
                       at::Device message_device);

}  // namespace dcpp::detail
