// The state-dict helpers on a 2-D layout (ModelLayout::shard_group and replicate_group): tensor
// parallel x data parallel on a 2 x 2 DeviceMesh of thread ranks. A full state dict reaches
// global rank 0 alone, and broadcast_from_rank0 reaches every rank, its failure too.

#include "dcpp_test.h"
#include "rank_threads.h"

#include <dcpp/core/checkpoint_error.h>
#include <dcpp/dist/device_mesh.h>
#include <dcpp/state_dict/model_state_dict.h>

#include <ATen/ATen.h>

namespace {

constexpr int kWorld = 4;

at::Tensor full_weight() { return at::arange(12, at::kFloat).reshape({4, 3}); }
at::Tensor full_bias() { return at::arange(3, at::kFloat).add(100); }

// A row-parallel weight over "tp" (2 rows each), a bias whole, replicated over "dp". As a user of
// 0.1 wrote it, process_group() is the tensor-parallel group; replicate_group() is new.
class TensorByDataParallel : public dcpp::ModelLayout {
 public:
  explicit TensorByDataParallel(const dcpp::DeviceMesh& mesh)
      : mesh_(mesh), weight_(at::zeros({2, 3})), bias_(at::zeros({3})) {}
  std::vector<dcpp::ParameterPlacement> placements() const override {
    const int64_t tp = mesh_.coordinate("tp");
    return {{"w", weight_, {4, 3}, {2 * tp, 0}, false}, {"b", bias_, {}, {}, false}};
  }
  c10::intrusive_ptr<c10d::ProcessGroup> process_group() const override {
    return mesh_.group("tp");
  }
  c10::intrusive_ptr<c10d::ProcessGroup> replicate_group() const override {
    return mesh_.group("dp");
  }
  void fill() {  // this rank's rows of the full tensors
    weight_.copy_(full_weight().narrow(0, 2 * mesh_.coordinate("tp"), 2));
    bias_.copy_(full_bias());
  }
  const at::Tensor& weight() const { return weight_; }
  const at::Tensor& bias() const { return bias_; }

 private:
  const dcpp::DeviceMesh& mesh_;
  at::Tensor weight_, bias_;
};

template <typename Body>
void on_mesh(Body body) {
  dcpp::test::on_rank_threads(kWorld, [&](int rank, const auto& store) {
    const dcpp::DeviceMesh mesh(store, rank, kWorld, {2, 2}, {"dp", "tp"},
                                dcpp::ProcessGroupOptions().with_gloo_hostname("127.0.0.1"));
    TensorByDataParallel layout(mesh);
    body(rank, layout);
  });
}

}  // namespace

TEST_CASE("a full state dict of tensor x data parallel reaches global rank 0 alone") {
  std::vector<dcpp::StateDict> full(kWorld), everywhere(kWorld);
  on_mesh([&](int rank, TensorByDataParallel& layout) {
    layout.fill();
    full[rank] = dcpp::get_model_state_dict(
        layout, dcpp::StateDictOptions().with_full_state_dict().with_cpu_offload());
    everywhere[rank] =
        dcpp::get_model_state_dict(layout, dcpp::StateDictOptions().with_full_state_dict());
  });
  REQUIRE(full[0].size() == 2);
  CHECK(dcpp::test::bitwise_equal(full[0].at("w").tensor(), full_weight()));
  CHECK(dcpp::test::bitwise_equal(full[0].at("b").tensor(), full_bias()));
  for (int rank = 1; rank < kWorld; ++rank) {
    INFO("rank " << rank);
    CHECK(full[rank].size() == 0);
  }
  for (int rank = 0; rank < kWorld; ++rank) {  // without cpu_offload: on every rank, as DCP's
    INFO("rank " << rank);
    CHECK(dcpp::test::bitwise_equal(everywhere[rank].at("w").tensor(), full_weight()));
  }
}

TEST_CASE("broadcast_from_rank0 on tensor x data parallel reaches every rank, a failure too") {
  std::vector<at::Tensor> weights(kWorld), biases(kWorld);
  std::vector<std::string> failures(kWorld);
  on_mesh([&](int rank, TensorByDataParallel& layout) {
    dcpp::StateDict given;
    if (rank == 0) {
      given.insert("w", full_weight());
      given.insert("b", full_bias());
    }
    dcpp::set_model_state_dict(
        layout, given, dcpp::StateDictOptions().with_full_state_dict().with_broadcast_from_rank0());
    weights[rank] = layout.weight().clone();
    biases[rank] = layout.bias().clone();

    // Rank 0 holds no full state dict (a piece): every rank fails, the other replica's too.
    dcpp::StateDict piece;
    if (rank == 0) piece.insert("w", dcpp::ShardedTensor::from_chunk_of(full_weight(), 0, 0, 2));
    try {
      dcpp::set_model_state_dict(layout, piece,
                                 dcpp::StateDictOptions().with_broadcast_from_rank0());
    } catch (const dcpp::CheckpointError& e) {
      failures[rank] = e.what();
    }
  });
  for (int rank = 0; rank < kWorld; ++rank) {
    INFO("rank " << rank);
    const int64_t tp = rank % 2;
    CHECK(dcpp::test::bitwise_equal(weights[rank], full_weight().narrow(0, 2 * tp, 2)));
    CHECK(dcpp::test::bitwise_equal(biases[rank], full_bias()));
    CHECK_THAT(failures[rank], Catch::Contains("broadcast_from_rank0 on rank 0"));
  }
}
