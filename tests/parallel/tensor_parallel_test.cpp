// Megatron's tensor-parallel layers and the TensorParallel layout (tensor_parallel_layers.h,
// tensor_parallel.h) on a 2 (dp) x 2 (tp) DeviceMesh of thread ranks: they compute what the
// unsplit model computes, their gradients are its gradients' slices, and a checkpoint saved on
// the mesh is the unsplit model's, bit for bit.

#include "dcpp_test.h"
#include "rank_threads.h"

#include <dcpp/checkpoint/checkpointer.h>
#include <dcpp/core/checkpoint_error.h>
#include <dcpp/dist/device_mesh.h>
#include <dcpp/parallel/tensor_parallel.h>
#include <dcpp/parallel/tensor_parallel_layers.h>
#include <dcpp/state_dict/model_state_dict.h>

#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>

namespace {

constexpr int kWorld = 4;

// An embedding, a column-parallel layer up, a row-parallel layer down: Megatron's MLP.
template <typename Embedding, typename Up, typename Down>
struct TinyLm : torch::nn::Module {
  TinyLm(Embedding e, Up u, Down d)
      : embedding(register_module("embedding", e)),
        up(register_module("up", u)),
        down(register_module("down", d)) {}
  at::Tensor forward(const at::Tensor& ids) { return down(at::tanh(up(embedding(ids)))); }
  Embedding embedding;
  Up up;
  Down down;
};
using WholeLm = TinyLm<torch::nn::Embedding, torch::nn::Linear, torch::nn::Linear>;
using SplitLm =
    TinyLm<dcpp::VocabParallelEmbedding, dcpp::ColumnParallelLinear, dcpp::RowParallelLinear>;

std::shared_ptr<WholeLm> whole_model() {
  torch::manual_seed(7);
  return std::make_shared<WholeLm>(torch::nn::Embedding(8, 4), torch::nn::Linear(4, 6),
                                   torch::nn::Linear(6, 4));
}

std::shared_ptr<SplitLm> split_model(const WholeLm& whole,
                                     const c10::intrusive_ptr<c10d::ProcessGroup>& tp) {
  return std::make_shared<SplitLm>(dcpp::VocabParallelEmbedding(whole.embedding, tp),
                                   dcpp::ColumnParallelLinear(whole.up, tp),
                                   dcpp::RowParallelLinear(whole.down, tp));
}

const at::Tensor kIds = at::tensor({0, 3, 5, 7, 2, 6}, at::kLong);

template <typename Body>
void on_mesh(Body body) {
  dcpp::test::on_rank_threads(kWorld, [&](int rank, const auto& store) {
    const dcpp::DeviceMesh mesh(store, rank, kWorld, {2, 2}, {"dp", "tp"},
                                dcpp::ProcessGroupOptions().with_gloo_hostname("127.0.0.1"));
    body(rank, mesh);
  });
}

bool close(const at::Tensor& a, const at::Tensor& b) { return at::allclose(a, b, 1e-6, 1e-6); }

}  // namespace

TEST_CASE("tensor-parallel layers compute the unsplit model, their gradients its slices") {
  const auto whole = whole_model();
  const at::Tensor expected = whole->forward(kIds);
  expected.sum().backward();

  std::vector<std::map<std::string, at::Tensor>> seen(kWorld);
  on_mesh([&](int rank, const dcpp::DeviceMesh& mesh) {
    const auto split = split_model(*whole, mesh.group("tp"));
    dcpp::TensorParallel layout(split, mesh.group("tp"), mesh.group("dp"));
    const at::Tensor output = split->forward(kIds);
    output.sum().backward();
    layout.synchronize_gradients();
    seen[rank]["output"] = output.detach();
    for (const auto& item : split->named_parameters()) seen[rank][item.key()] = item.value().grad();
  });
  for (int rank = 0; rank < kWorld; ++rank) {
    INFO("rank " << rank);
    const int64_t tp = rank % 2;
    auto& s = seen[rank];
    CHECK(close(s["output"], expected));
    CHECK(close(s["embedding.weight"], whole->embedding->weight.grad().narrow(0, 4 * tp, 4)));
    CHECK(close(s["up.weight"], whole->up->weight.grad().narrow(0, 3 * tp, 3)));
    CHECK(close(s["up.bias"], whole->up->bias.grad().narrow(0, 3 * tp, 3)));
    CHECK(close(s["down.weight"], whole->down->weight.grad().narrow(1, 3 * tp, 3)));
    CHECK(close(s["down.bias"], whole->down->bias.grad()));
  }
}

TEST_CASE("a TensorParallel model saved on 2 x 2 is the unsplit model, bit for bit") {
  const auto whole = whole_model();
  dcpp::test::TempDir dir;
  std::vector<dcpp::StateDict> full(kWorld);
  on_mesh([&](int rank, const dcpp::DeviceMesh& mesh) {
    const auto split = split_model(*whole, mesh.group("tp"));
    const dcpp::TensorParallel layout(split, mesh.group("tp"), mesh.group("dp"));
    dcpp::StateDict state = dcpp::get_model_state_dict(layout);
    dcpp::save(state, dir / "ckpt", dcpp::SaveOptions().with_process_group(mesh.world_group()));
    full[rank] = dcpp::get_model_state_dict(
        layout, dcpp::StateDictOptions().with_full_state_dict().with_cpu_offload());
  });
  // Loaded on one process into the unsplit model's own state dict.
  const auto fresh = std::make_shared<WholeLm>(torch::nn::Embedding(8, 4), torch::nn::Linear(4, 6),
                                               torch::nn::Linear(6, 4));
  dcpp::StateDict loaded = dcpp::get_model_state_dict(*fresh);
  dcpp::load(loaded, dir / "ckpt");
  const dcpp::StateDict expected = dcpp::get_model_state_dict(*whole);
  REQUIRE(loaded.size() == 5);
  for (const auto& item : expected) {
    INFO(item.key);
    CHECK(dcpp::test::bitwise_equal(loaded.at(item.key).tensor(), item.value.tensor()));
    CHECK(dcpp::test::bitwise_equal(full[0].at(item.key).tensor(), item.value.tensor()));
  }
  for (int rank = 1; rank < kWorld; ++rank) CHECK(full[rank].size() == 0);
}

TEST_CASE("a tensor-parallel layer that does not split evenly is refused, naming it") {
  std::vector<std::string> errors(2);
  dcpp::test::on_ranks(2, "uneven", [&](int rank, const auto& group) {
    try {
      dcpp::ColumnParallelLinear(torch::nn::Linear(4, 5), group);
    } catch (const dcpp::CheckpointError& e) {
      errors[rank] = e.what();
    }
  });
  for (const std::string& error : errors) {
    CHECK_THAT(error, Catch::Contains("ColumnParallelLinear on rank") &&
                          Catch::Contains("its output features, 5, does not split evenly over "
                                          "the 2 ranks"));
  }
}
