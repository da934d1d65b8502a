// The manager and the async checkpointer given an NCCL-only process group (issue 59, findings 1
// and 6), on a machine without a GPU: every rank gets a CheckpointError that says what to give
// instead, none a raw c10::Error, none waits. With a device, tests/cuda saves and restores through
// a real NCCL group.

#include "dcpp_test.h"
#include "nccl_stand_in.h"
#include "rank_threads.h"

#include <dcpp/async/async_checkpointer.h>
#include <dcpp/plugin/checkpoint_manager.h>

#include <ATen/ATen.h>
#include <ATen/Context.h>

#include <string>
#include <vector>

namespace {

constexpr int kStandInRanks = 2;

// What `run` threw on each of kStandInRanks rank threads given the stand-in: "kind: message", or
// "none".
template <typename Run>
std::vector<std::string> errors_on_ranks(Run run) {
  std::vector<std::string> errors(kStandInRanks, "none");
  dcpp::test::on_rank_threads(
      kStandInRanks, [&](int rank, const c10::intrusive_ptr<c10d::Store>& store) {
        try {
          run(rank, dcpp::test::nccl_stand_in(store, rank, kStandInRanks));
        } catch (const dcpp::CheckpointError& error) {
          errors[rank] =
              std::string(dcpp::to_string(error.kind())) + ": " + error.what_without_backtrace();
        }
      });
  return errors;
}

}  // namespace

TEST_CASE(
    "a checkpoint manager over an NCCL-only group without a CUDA device refuses on every "
    "rank, saying what to give") {
  if (at::globalContext().hasCUDA()) {
    SUCCEED("a CUDA device is visible: tests/cuda saves through a real NCCL group");
    return;
  }
  dcpp::test::TempDir dir;
  const std::vector<std::string> errors = errors_on_ranks([&](int rank, const auto& group) {
    dcpp::CheckpointManager manager(dcpp::CheckpointManagerOptions()
                                        .with_root(dir.path())
                                        .with_async(false)
                                        .with_process_group(group));
    dcpp::StateDict state;
    state.insert("weight", at::full({4}, static_cast<double>(rank)));
    dcpp::SaveRequest request;
    request.step = 1;
    manager.save(state, request);
    manager.wait();
  });
  for (int rank = 0; rank < kStandInRanks; ++rank) {
    INFO("rank " << rank);
    CHECK_THAT(errors[rank], Catch::Contains("usage: "));
    CHECK_THAT(errors[rank],
               Catch::Contains("on rank " + std::to_string(rank) +
                               " of 2: the process group (backend 'nccl') takes no CPU "
                               "tensors and this process sees no CUDA device to send its "
                               "messages through; give it a Gloo group, or one with a CPU "
                               "backend"));
  }
}

TEST_CASE(
    "an async checkpointer refuses an NCCL-only group it could not message through, when "
    "made") {
  if (at::globalContext().hasCUDA()) {
    SUCCEED("a CUDA device is visible: tests/cuda saves through a real NCCL group");
    return;
  }
  const std::vector<std::string> errors = errors_on_ranks([](int, const auto& group) {
    dcpp::AsyncCheckpointer checkpointer(
        dcpp::AsyncCheckpointerOptions().with_process_group(group));
  });
  for (int rank = 0; rank < kStandInRanks; ++rank) {
    INFO("rank " << rank);
    CHECK_THAT(errors[rank],
               Catch::Contains("usage: AsyncCheckpointer on rank " + std::to_string(rank) +
                               " of 2: the process group (backend 'nccl') "
                               "takes no CPU tensors"));
  }
}
