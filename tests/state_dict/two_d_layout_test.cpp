// The state-dict helpers on N-D layouts (ModelLayout::shard_group, replicate_group, stage_group):
// tensor parallel x data parallel, and a pipeline of tensor-parallel stages, on 2 x 2 DeviceMeshes
// of thread ranks. A full state dict (of a pipeline: every stage's) reaches global rank 0 alone,
// and broadcast_from_rank0 reaches every rank, its failure too.

#include "dcpp_test.h"
#include "rank_threads.h"

#include <dcpp/core/checkpoint_error.h>
#include <dcpp/core/torch_compat.h>
#include <dcpp/dist/device_mesh.h>
#include <dcpp/state_dict/model_state_dict.h>
#include <dcpp/state_dict/optimizer_state_dict.h>

#include <ATen/ATen.h>
#include <torch/optim/sgd.h>

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

namespace {

// Two pipeline stages ("pp") of two tensor-parallel ranks ("tp"): stage s holds "<s>.w" ([4, 3],
// rows split over "tp") and "<s>.b" ([3], whole), trained by SGD with momentum.
class StagedLayout : public dcpp::ModelLayout {
 public:
  explicit StagedLayout(const dcpp::DeviceMesh& mesh)
      : mesh_(mesh),
        weight_(at::zeros({2, 3}).requires_grad_()),
        bias_(at::zeros({3}).requires_grad_()) {}
  std::vector<dcpp::ParameterPlacement> placements() const override {
    const std::string stage = std::to_string(mesh_.coordinate("pp"));
    const int64_t tp = mesh_.coordinate("tp");
    return {{stage + ".w", weight_, {4, 3}, {2 * tp, 0}, false},
            {stage + ".b", bias_, {}, {}, false}};
  }
  c10::intrusive_ptr<c10d::ProcessGroup> process_group() const override {
    return mesh_.group("tp");
  }
  c10::intrusive_ptr<c10d::ProcessGroup> stage_group() const override { return mesh_.group("pp"); }
  // Stage s's whole tensors: the full weight and bias plus 1000 s.
  static at::Tensor whole_weight(int64_t stage) { return full_weight().add(1000 * stage); }
  static at::Tensor whole_bias(int64_t stage) { return full_bias().add(1000 * stage); }
  void fill() {
    at::NoGradGuard no_grad;
    const int64_t stage = mesh_.coordinate("pp");
    weight_.copy_(whole_weight(stage).narrow(0, 2 * mesh_.coordinate("tp"), 2));
    bias_.copy_(whole_bias(stage));
  }
  // One SGD step whose gradients are the parameters themselves: momentum = the parameters.
  void step(torch::optim::SGD& sgd) {
    weight_.mutable_grad() = weight_.detach().clone();
    bias_.mutable_grad() = bias_.detach().clone();
    sgd.step();
  }
  std::vector<at::Tensor> parameters() const { return {weight_, bias_}; }

 private:
  const dcpp::DeviceMesh& mesh_;
  at::Tensor weight_, bias_;
};

}  // namespace

TEST_CASE("a pipeline of tensor-parallel stages: the full state dict is every stage's, on rank 0") {
  std::vector<dcpp::StateDict> model(kWorld), optim(kWorld);
  std::vector<std::string> errors(kWorld);
  std::vector<at::Tensor> restored_momentum(kWorld), restored_weight(kWorld);
  dcpp::test::on_rank_threads(kWorld, [&](int rank, const auto& store) {
    const dcpp::DeviceMesh mesh(store, rank, kWorld, {2, 2}, {"pp", "tp"},
                                dcpp::ProcessGroupOptions().with_gloo_hostname("127.0.0.1"));
    StagedLayout layout(mesh);
    layout.fill();
    torch::optim::SGD sgd(layout.parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
    const auto full = dcpp::StateDictOptions().with_full_state_dict().with_cpu_offload();
    model[rank] = dcpp::get_model_state_dict(layout, full);  // before the step: the filled values
    for (auto& item : model[rank]) item.value = item.value.tensor().clone();  // not the model's
    layout.step(sgd);
    optim[rank] = dcpp::get_optimizer_state_dict(layout, sgd, full);

    // Rank 0 gives both back; every rank takes its own stage's pieces, strict.
    StagedLayout fresh(mesh);
    torch::optim::SGD fresh_sgd(fresh.parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
    const auto from_rank0 =
        dcpp::StateDictOptions().with_full_state_dict().with_broadcast_from_rank0();
    try {
      dcpp::set_model_state_dict(fresh, model[rank], from_rank0);
      dcpp::set_optimizer_state_dict(fresh, fresh_sgd, optim[rank], from_rank0);
    } catch (const dcpp::CheckpointError& e) {
      errors[rank] = e.what();
    }
    restored_weight[rank] = fresh.parameters()[0].detach().clone();
    const auto& state = fresh_sgd.state();
    const auto found = state.find(dcpp::compat::optimizer_state_key(state, fresh.parameters()[0]));
    if (found != state.end()) {
      restored_momentum[rank] =
          static_cast<torch::optim::SGDParamState&>(*found->second).momentum_buffer().clone();
    }
  });
  REQUIRE(model[0].size() == 4);
  for (int64_t stage = 0; stage < 2; ++stage) {
    const std::string s = std::to_string(stage);
    CHECK(dcpp::test::bitwise_equal(model[0].at(s + ".w").tensor(),
                                    StagedLayout::whole_weight(stage)));
    CHECK(
        dcpp::test::bitwise_equal(model[0].at(s + ".b").tensor(), StagedLayout::whole_bias(stage)));
    CHECK(dcpp::test::bitwise_equal(
        optim[0].at("state").dict().at(s + ".w").dict().at("momentum_buffer").tensor(),
        StagedLayout::whole_weight(stage)));
  }
  CHECK(optim[0].at("param_groups").list().size() == 2);  // each stage's group
  for (int rank = 1; rank < kWorld; ++rank) {
    CHECK(model[rank].size() == 0);
    CHECK(optim[rank].size() == 0);
  }
  for (int rank = 0; rank < kWorld; ++rank) {
    INFO("rank " << rank);
    CHECK(errors[rank].empty());
    const int64_t stage = rank / 2, tp = rank % 2;
    const at::Tensor piece = StagedLayout::whole_weight(stage).narrow(0, 2 * tp, 2);
    CHECK(dcpp::test::bitwise_equal(restored_weight[rank], piece));
    REQUIRE(restored_momentum[rank].defined());
    CHECK(dcpp::test::bitwise_equal(restored_momentum[rank], piece));
  }
}
