// DeviceMesh (<dcpp/dist/device_mesh.h>): PyTorch's init_device_mesh rank order, and one real Gloo
// group per dimension, on ranks as threads.

#include "dcpp_test.h"
#include "rank_threads.h"

#include <dcpp/core/checkpoint_error.h>
#include <dcpp/dist/device_mesh.h>

#include <ATen/ATen.h>
#include <torch/cuda.h>

#include <map>

namespace {

// The sum over `group` of each member's global rank.
int64_t sum_of_ranks(const c10::intrusive_ptr<c10d::ProcessGroup>& group, int rank) {
  std::vector<at::Tensor> tensors{at::full({1}, rank, at::kLong)};
  group->allreduce(tensors)->wait();
  return tensors[0].item<int64_t>();
}

struct Seen {
  std::vector<int64_t> coordinates;
  std::map<std::string, std::vector<int>> ranks;
  std::map<std::string, int64_t> sums;
  std::map<std::string, int> group_rank;
};

}  // namespace

TEST_CASE("DeviceMesh: ranks in row-major order, one group per dimension") {
  // dcpp-launch -n 8 as a 2 (pp) x 2 (dp) x 2 (tp) mesh: init_device_mesh's
  // torch.arange(8).view(2, 2, 2), the last dimension fastest.
  constexpr int kWorld = 8;
  std::vector<Seen> seen(kWorld);
  dcpp::test::on_rank_threads(kWorld, [&](int rank, const auto& store) {
    const dcpp::DeviceMesh mesh(store, rank, kWorld, {2, 2, 2}, {"pp", "dp", "tp"},
                                dcpp::ProcessGroupOptions().with_gloo_hostname("127.0.0.1"));
    seen[rank].coordinates = mesh.coordinates();
    for (const std::string name : {"pp", "dp", "tp"}) {
      seen[rank].ranks[name] = mesh.group_ranks(name);
      seen[rank].sums[name] = sum_of_ranks(mesh.group(name), rank);
      seen[rank].group_rank[name] = mesh.group(name)->getRank();
    }
    seen[rank].sums["world"] = sum_of_ranks(mesh.world_group(), rank);
  });
  for (int rank = 0; rank < kWorld; ++rank) {
    INFO("rank " << rank);
    const std::vector<int64_t> expected{rank / 4, rank / 2 % 2, rank % 2};
    CHECK(seen[rank].coordinates == expected);
    const int base_tp = rank - rank % 2;
    const int base_dp = rank - (rank / 2 % 2) * 2;
    const int base_pp = rank % 4;
    CHECK(seen[rank].ranks["tp"] == std::vector<int>{base_tp, base_tp + 1});
    CHECK(seen[rank].ranks["dp"] == std::vector<int>{base_dp, base_dp + 2});
    CHECK(seen[rank].ranks["pp"] == std::vector<int>{base_pp, base_pp + 4});
    // The groups hold exactly those ranks: each all-reduce sums their global ranks.
    CHECK(seen[rank].sums["tp"] == 2 * base_tp + 1);
    CHECK(seen[rank].sums["dp"] == 2 * base_dp + 2);
    CHECK(seen[rank].sums["pp"] == 2 * base_pp + 4);
    CHECK(seen[rank].sums["world"] == 28);
    CHECK(seen[rank].group_rank["tp"] == expected[2]);
    CHECK(seen[rank].group_rank["dp"] == expected[1]);
    CHECK(seen[rank].group_rank["pp"] == expected[0]);
  }
}

TEST_CASE("DeviceMesh: a shape that is not the job's, and an unknown dimension, are refused") {
  const c10::intrusive_ptr<c10d::Store> store = c10::make_intrusive<c10d::HashStore>();
  const dcpp::CheckpointError wrong_size = dcpp::test::error_of([&] {
    dcpp::DeviceMesh(store, 0, 4, {2, 3}, {"dp", "tp"});
  });
  CHECK(wrong_size.kind() == dcpp::ErrorKind::kUsage);
  CHECK_THAT(wrong_size.what(), Catch::Contains("the mesh holds 6 ranks and the job has 4"));
  CHECK_THROWS_WITH(dcpp::DeviceMesh(store, 0, 4, {2, 2}, {"dp", "dp"}),
                    Catch::Contains("distinct and not empty"));
  CHECK_THROWS_WITH(dcpp::DeviceMesh(store, 0, 4, {4}, {"dp", "tp"}),
                    Catch::Contains("one name per dimension"));

  const dcpp::DeviceMesh single(store, 0, 1, {1, 1}, {"dp", "tp"},
                                dcpp::ProcessGroupOptions().with_gloo_hostname("127.0.0.1"));
  CHECK(single.size("tp") == 1);
  CHECK(single.group("tp")->getSize() == 1);
  CHECK(single.rank_at({0, 0}) == 0);
  CHECK_THROWS_WITH(single.group("pp"),
                    Catch::Contains("no dimension is named \"pp\" (its dimensions are \"dp\", "
                                    "\"tp\")"));
  CHECK_THROWS_WITH(single.rank_at({0, 1}), Catch::Contains("lie outside the shape (1, 1)"));
}

TEST_CASE(
    "DeviceMesh: Gloo training groups by default, NCCL ones refused clearly without NCCL or "
    "a CUDA device") {
  const c10::intrusive_ptr<c10d::Store> store = c10::make_intrusive<c10d::HashStore>();
  const auto loopback = dcpp::ProcessGroupOptions().with_gloo_hostname("127.0.0.1");
  const dcpp::DeviceMesh gloo(store, 0, 1, {1}, {"dp"}, loopback);
  CHECK(gloo.training_backend() == dcpp::TrainingBackend::kGloo);
  CHECK(gloo.training_group("dp") == gloo.group("dp"));

  if (dcpp::nccl_available() && torch::cuda::is_available()) {
    return;  // nothing to refuse: tests/cuda/ makes NCCL groups there
  }
  const dcpp::CheckpointError refused = dcpp::test::error_of([&] {
    dcpp::DeviceMesh(store, 0, 1, {1}, {"dp"},
                     dcpp::ProcessGroupOptions(loopback).with_group_name("nccl"),
                     dcpp::TrainingBackend::kNccl);
  });
  CHECK(refused.kind() == dcpp::ErrorKind::kUsage);
  CHECK_THAT(refused.what(), Catch::Contains("rank 0"));
  if (dcpp::nccl_available()) {  // a CUDA libtorch on a machine without a GPU
    CHECK_THAT(refused.what(), Catch::Contains("the NCCL process group \"nccl.mesh.dp.0.nccl\" "
                                               "needs a CUDA device and this process sees none"));
  } else {
    CHECK_THAT(refused.what(), Catch::Contains("this build of dcpp has no NCCL"));
  }
}
