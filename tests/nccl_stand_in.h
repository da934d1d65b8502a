#pragma once
// A process group that treats CPU tensors as an NCCL-only group does, on a machine without a GPU:
// c10d refuses them, "No backend type associated with device type cpu" (libtorch 2.x: a group with
// a backend for CUDA tensors only; 1.13: a group that names itself "nccl" and refuses them). Over
// loopback Gloo underneath, so what it does take travels for real.

#include "dcpp_test.h"

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

#include <chrono>
#include <string>
#include <type_traits>
#include <vector>

namespace dcpp::test {

/// `Gloo` as it is where its backend has no `setTimeout` (libtorch before 2.7 or so).
template <typename Gloo, typename = void>
class TimeoutInOptions : public Gloo {
 public:
  using Gloo::Gloo;
};

/// Where it has one, libtorch's is inline and reaches gloo's own library, which libtorch links
/// privately (2.14: an undefined `gloo::Context::setTimeout` at link time). This one changes the
/// options only: the stand-in's contexts keep the timeout they were created with.
template <typename Gloo>
class TimeoutInOptions<Gloo, std::void_t<decltype(&Gloo::setTimeout)>> : public Gloo {
 public:
  using Gloo::Gloo;

  void setTimeout(std::chrono::milliseconds timeout) override {
    this->getOptions()->timeout = timeout;
  }
};

class CpuRefusingGloo final : public TimeoutInOptions<c10d::ProcessGroupGloo> {
 public:
  using TimeoutInOptions<c10d::ProcessGroupGloo>::TimeoutInOptions;

  const std::string getBackendName() const override { return "nccl"; }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& options) override {
    refuse_cpu(tensors);
    return ProcessGroupGloo::broadcast(tensors, options);
  }
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& options) override {
    refuse_cpu(tensors);
    return ProcessGroupGloo::allreduce(tensors, options);
  }
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& options) override {
    refuse_cpu(inputs);
    return ProcessGroupGloo::allgather(outputs, inputs, options);
  }
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int peer,
                                      int tag) override {
    refuse_cpu(tensors);
    return ProcessGroupGloo::send(tensors, peer, tag);
  }
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int peer,
                                      int tag) override {
    refuse_cpu(tensors);
    return ProcessGroupGloo::recv(tensors, peer, tag);
  }

 private:
  static void refuse_cpu(const std::vector<at::Tensor>& tensors) {
    for (const at::Tensor& tensor : tensors) {
      TORCH_CHECK(!tensor.is_cpu(), "No backend type associated with device type cpu");
    }
  }
};

/// Rank `rank` of `size` of an NCCL-only stand-in over `store` (keys under "nccl-stand-in/").
template <typename Group = c10d::ProcessGroup>
c10::intrusive_ptr<Group> nccl_stand_in(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                        int size) {
  auto options = c10d::ProcessGroupGloo::Options::create();
  options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
  auto prefixed = c10::make_intrusive<c10d::PrefixStore>("nccl-stand-in/", store);
  auto gloo = c10::make_intrusive<CpuRefusingGloo>(prefixed, rank, size, options);
  if constexpr (std::is_base_of_v<Group, CpuRefusingGloo>) {
    return gloo;
  } else {
    auto group = c10::make_intrusive<Group>(prefixed, rank, size);
    using BackendPtr = decltype(group->getBackend(c10::DeviceType::CUDA));
    group->setBackend(c10::DeviceType::CUDA, Group::BackendType::NCCL, BackendPtr(gloo));
    group->setDefaultBackend(Group::BackendType::NCCL);
    return group;
  }
}

}  // namespace dcpp::test
