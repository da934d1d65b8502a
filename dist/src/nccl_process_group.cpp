// NCCL groups for training on GPUs (process_group.h), compiled with ProcessGroupNCCL where libtorch
// has it (DCPP_WITH_NCCL, cmake/dcpp_cuda.cmake); elsewhere they are refused with the reason.

#include <dcpp/dist/process_group.h>

#include <dcpp/core/checkpoint_error.h>

#ifdef DCPP_WITH_NCCL
#include <c10/cuda/CUDAFunctions.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include <string>

namespace dcpp {

namespace {

void check_group_arguments(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                           const ProcessGroupOptions& options) {
  const std::string what = "make_nccl_process_group";
  if (!store) throw CheckpointError(ErrorKind::kUsage, what + ": the store is null");
  if (size < 1 || rank < 0 || rank >= size) {
    throw CheckpointError(ErrorKind::kUsage, what + ": rank " + std::to_string(rank) +
                                                 " is outside [0, " + std::to_string(size) + ")");
  }
  if (options.group_name.empty()) {
    throw CheckpointError(ErrorKind::kUsage, what + ": the group name is empty");
  }
  if (options.timeout.count() <= 0) {
    throw CheckpointError(ErrorKind::kUsage, what + ": the timeout must be positive");
  }
}

}  // namespace

#ifdef DCPP_WITH_NCCL

bool nccl_available() { return true; }

c10::intrusive_ptr<c10d::ProcessGroup> make_nccl_process_group(
    const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
    const ProcessGroupOptions& options) {
  check_group_arguments(store, rank, size, options);
  const std::string who = "rank " + std::to_string(rank) + " of " + std::to_string(size) +
                          ": the NCCL process group \"" + options.group_name + "\"";
  if (c10::cuda::device_count() == 0) {
    throw CheckpointError(ErrorKind::kUsage,
                          who +
                              " needs a CUDA device and this process sees none; train on the "
                              "CPU with a Gloo group (make_gloo_process_group)");
  }
  try {
    auto prefixed = c10::make_intrusive<c10d::PrefixStore>("dcpp/" + options.group_name, store);
    auto nccl_options = c10d::ProcessGroupNCCL::Options::create();
    nccl_options->timeout = options.timeout;
    auto nccl = c10::make_intrusive<c10d::ProcessGroupNCCL>(prefixed, rank, size, nccl_options);
    auto group = c10::make_intrusive<c10d::ProcessGroup>(prefixed, rank, size);
    group->setBackend(c10::DeviceType::CUDA, c10d::ProcessGroup::BackendType::NCCL, nccl);
    group->setDefaultBackend(c10d::ProcessGroup::BackendType::NCCL);
    return group;
  } catch (const c10::Error& error) {
    throw CheckpointError(ErrorKind::kRankFailed,
                          who + " could not be made: " + error.what_without_backtrace());
  }
}

#else

bool nccl_available() { return false; }

c10::intrusive_ptr<c10d::ProcessGroup> make_nccl_process_group(
    const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
    const ProcessGroupOptions& options) {
  check_group_arguments(store, rank, size, options);
  throw CheckpointError(ErrorKind::kUsage,
                        "make_nccl_process_group: rank " + std::to_string(rank) +
                            ": this build of dcpp has no NCCL (its libtorch was built without "
                            "CUDA or without c10d's ProcessGroupNCCL); build it against a CUDA "
                            "libtorch (docs/gpu.md), or train with a Gloo group");
}

#endif

}  // namespace dcpp
