// The devices GroupCalls's tensors travel on (core/group_reach.h, core/group_calls.h): an NCCL-only
// group gets no CPU tensor, Gloo's send and recv get no CUDA tensor, and a refusal is a
// CheckpointError on every rank, never a raw c10::Error (issue 59, finding 1).

#include "dcpp_test.h"
#include "nccl_stand_in.h"
#include "rank_threads.h"

#include "core/group_calls.h"
#include "core/group_reach.h"

#include <dcpp/core/torch_compat.h>

#include <ATen/ATen.h>
#include <ATen/Context.h>

#include <optional>
#include <string>
#include <vector>

using dcpp::detail::GroupReach;
using dcpp::detail::wire_device;

namespace {

const at::Device kCpu(at::kCPU);
const at::Device kGpu0(at::kCUDA, 0);
const at::Device kGpu1(at::kCUDA, 1);

constexpr GroupReach kGloo{true, true, false};
constexpr GroupReach kNcclOnly{false, true, true};
constexpr GroupReach kCpuGlooCudaNccl{true, true, true};  // 2.x's "cpu:gloo,cuda:nccl"

}  // namespace

TEST_CASE("a tensor travels on a device its group takes for the call") {
  // CPU tensors: as they are, except through an NCCL-only group: on its message device.
  CHECK(wire_device(kGloo, kCpu, false, kCpu) == kCpu);
  CHECK(wire_device(kGloo, kCpu, true, kCpu) == kCpu);
  CHECK(wire_device(kCpuGlooCudaNccl, kCpu, true, kCpu) == kCpu);
  CHECK(wire_device(kNcclOnly, kCpu, false, kGpu1) == kGpu1);
  CHECK(wire_device(kNcclOnly, kCpu, true, kGpu1) == kGpu1);
  // CUDA tensors: as they are (their own device, not the message device), except through Gloo's
  // send and recv, which read and write host memory only.
  CHECK(wire_device(kGloo, kGpu1, false, kCpu) == kGpu1);
  CHECK(wire_device(kGloo, kGpu1, true, kCpu) == kCpu);
  CHECK(wire_device(kNcclOnly, kGpu1, false, kGpu0) == kGpu1);
  CHECK(wire_device(kNcclOnly, kGpu1, true, kGpu0) == kGpu1);
  CHECK(wire_device(kCpuGlooCudaNccl, kGpu0, true, kCpu) == kGpu0);
  // A group that takes no CUDA tensor at all (a CPU-only backend): through the host.
  CHECK(wire_device(GroupReach{true, false, false}, kGpu0, false, kCpu) == kCpu);
  // No rule for other devices: c10d's own refusal names them.
  CHECK(wire_device(kNcclOnly, at::Device(at::kMeta), false, kGpu0) == at::Device(at::kMeta));
}

TEST_CASE("what a Gloo group and an NCCL-only group take, as libtorch reports it") {
  std::vector<std::string> reported;
  dcpp::test::on_rank_threads(1, [&](int rank, const c10::intrusive_ptr<c10d::Store>& store) {
    const auto gloo = dcpp::test::loopback_group(store, rank, 1, "reach-gloo");
    const auto nccl = dcpp::test::nccl_stand_in(store, rank, 1);
    reported = {dcpp::compat::backend_for(*gloo, c10::DeviceType::CPU),
                dcpp::compat::backend_for(*gloo, c10::DeviceType::CUDA),
                dcpp::compat::backend_for(*nccl, c10::DeviceType::CPU),
                dcpp::compat::backend_for(*nccl, c10::DeviceType::CUDA)};
  });
  // Gloo takes both devices; the NCCL stand-in takes CUDA tensors only.
  CHECK(reported == std::vector<std::string>{"gloo", "gloo", "", "nccl"});
}

TEST_CASE(
    "messages through an NCCL-only group without a CUDA device: a CheckpointError on every "
    "rank, before any collective") {
  if (at::globalContext().hasCUDA()) {
    // Where there is a device, the messages travel on it: tests/cuda covers that.
    SUCCEED("a CUDA device is visible");
    return;
  }
  constexpr int kRanks = 2;
  std::vector<std::vector<std::string>> errors(kRanks);
  dcpp::test::on_rank_threads(kRanks, [&](int rank, const c10::intrusive_ptr<c10d::Store>& store) {
    dcpp::detail::GroupCalls calls(dcpp::test::nccl_stand_in(store, rank, kRanks), "test");
    auto refused = [&](const std::function<void()>& call) {
      try {
        call();
        errors[rank].push_back("no error");
      } catch (const dcpp::CheckpointError& error) {
        errors[rank].push_back(std::string(dcpp::to_string(error.kind())) + ": " +
                               error.what_without_backtrace());
      }
    };
    refused([&] { calls.all_reduce(int64_t{1}, c10d::ReduceOp::SUM, "a flag"); });
    refused([&] { calls.all_gather(at::ones({3}), "values"); });
    refused([&] { calls.broadcast_bytes("bytes", 0, "bytes"); });
    refused([&] {
      std::vector<at::Tensor> tensors{at::ones({2})};
      calls.broadcast(tensors, 0, "a tensor");
    });
    at::Tensor buffer = at::zeros({4});
    refused([&] {
      if (rank == 0) calls.send(at::ones({4}), 1, 0, "a tensor");
      if (rank == 1) calls.recv(buffer, 0, 0, "a tensor");
    });
  });
  for (int rank = 0; rank < kRanks; ++rank) {
    INFO("rank " << rank);
    REQUIRE(errors[rank].size() == 5);
    for (const std::string& error : errors[rank]) {
      CHECK_THAT(error, Catch::Contains("usage: test on rank " + std::to_string(rank) +
                                        " of 2: the process group (backend 'nccl') takes no "
                                        "CPU tensors and this process sees no CUDA device"));
    }
  }
}

TEST_CASE("a collective c10d refuses to start is a CheckpointError") {
  std::optional<dcpp::CheckpointError> error;
  dcpp::test::on_rank_threads(1, [&](int rank, const c10::intrusive_ptr<c10d::Store>& store) {
    dcpp::detail::GroupCalls calls(dcpp::test::loopback_group(store, rank, 1, "refused"), "test");
    std::vector<at::Tensor> tensors{at::ones({2})};
    error = dcpp::test::error_of([&] { calls.broadcast(tensors, 5, "from a rank out of range"); });
  });
  REQUIRE(error.has_value());
  CHECK(error->kind() == dcpp::ErrorKind::kUsage);
  CHECK_THAT(error->what_without_backtrace(),
             Catch::Contains("test on rank 0 of 1: the process group (backend 'gloo') "
                             "refused broadcast of from a rank out of range: "));
}

TEST_CASE("through Gloo, CPU tensors still travel as they are, values exact") {
  constexpr int kRanks = 3;
  std::vector<std::vector<int64_t>> gathered(kRanks);
  std::vector<std::string> received(kRanks);
  std::vector<at::Tensor> passed(kRanks);
  dcpp::test::on_ranks(
      kRanks, "gloo-values", [&](int rank, const c10::intrusive_ptr<c10d::ProcessGroup>& group) {
        dcpp::detail::GroupCalls calls(group, "test");
        for (const at::Tensor& each :
             calls.all_gather(at::full({1}, 10 + rank, at::kLong), "ranks")) {
          gathered[rank].push_back(each.item<int64_t>());
        }
        received[rank] =
            calls.broadcast_bytes(rank == 2 ? std::string("from two\0!", 10) : "", 2, "bytes");
        at::Tensor ring = at::full({5}, static_cast<double>(rank), at::kDouble);
        auto sent = calls.start_send(ring, (rank + 1) % kRanks, 7, "the ring");
        passed[rank] = at::empty({5}, at::kDouble);
        calls.recv(passed[rank], (rank + kRanks - 1) % kRanks, 7, "the ring");
        calls.wait(sent, "the ring");
      });
  for (int rank = 0; rank < kRanks; ++rank) {
    CHECK(gathered[rank] == std::vector<int64_t>{10, 11, 12});
    CHECK(received[rank] == std::string("from two\0!", 10));
    CHECK(dcpp::test::bitwise_equal(
        passed[rank],
        at::full({5}, static_cast<double>((rank + kRanks - 1) % kRanks), at::kDouble)));
  }
}
