// HSDP: FullyShardedDataParallel sharded over one group and replicated over another
// (fully_sharded_data_parallel.h), on a 2 (replicate) x 2 (shard) DeviceMesh of thread ranks. It
// trains as one process does, and its checkpoint and full state dict are the unsplit model's.

#include "dcpp_test.h"
#include "rank_threads.h"

#include <dcpp/checkpoint/checkpointer.h>
#include <dcpp/dist/device_mesh.h>
#include <dcpp/parallel/fully_sharded_data_parallel.h>
#include <dcpp/state_dict/model_state_dict.h>

#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/sgd.h>

namespace {

constexpr int kHsdpRanks = 4;
constexpr int kHsdpSteps = 3;

torch::nn::Sequential make_hsdp_model() {
  torch::manual_seed(11);
  return torch::nn::Sequential(torch::nn::Linear(4, 6), torch::nn::Tanh(), torch::nn::Linear(6, 3));
}

// The global batch of a step: 8 rows; rank r of a 4-rank data-parallel job takes rows 2r, 2r+1.
std::pair<at::Tensor, at::Tensor> hsdp_batch(int step) {
  const at::Tensor x = at::linspace(-1, 1, 32).reshape({8, 4}).add(0.1 * step);
  return {x, at::sin(x.narrow(1, 0, 3))};
}

}  // namespace

TEST_CASE("HSDP on 2 x 2 trains as one process does; its checkpoint is the unsplit model") {
  // One process, the whole batch.
  torch::nn::Sequential single = make_hsdp_model();
  torch::optim::SGD single_sgd(single->parameters(), torch::optim::SGDOptions(0.1));
  std::vector<double> single_losses;
  for (int step = 0; step < kHsdpSteps; ++step) {
    const auto [x, y] = hsdp_batch(step);
    single_sgd.zero_grad();
    const at::Tensor loss = at::mse_loss(single->forward(x), y);
    loss.backward();
    single_sgd.step();
    single_losses.push_back(loss.item<double>());
  }

  dcpp::test::TempDir dir;
  std::vector<std::vector<double>> losses(kHsdpRanks);
  std::vector<dcpp::StateDict> full(kHsdpRanks);
  // Each rank's model made here, one after the other: the ranks are threads of one process, and
  // libtorch's default generator (the seed, the initialisation) is one for all of them.
  std::vector<torch::nn::Sequential> models;
  for (int rank = 0; rank < kHsdpRanks; ++rank) models.push_back(make_hsdp_model());
  dcpp::test::on_rank_threads(kHsdpRanks, [&](int rank, const auto& store) {
    const dcpp::DeviceMesh mesh(store, rank, kHsdpRanks, {2, 2}, {"replicate", "shard"},
                                dcpp::ProcessGroupOptions().with_gloo_hostname("127.0.0.1"));
    torch::nn::Sequential model = models[rank];
    dcpp::FullyShardedDataParallel hsdp(model.ptr(), mesh.group("shard"), mesh.group("replicate"));
    torch::optim::SGD sgd(hsdp.parameters(), torch::optim::SGDOptions(0.1));
    for (int step = 0; step < kHsdpSteps; ++step) {
      const auto [x, y] = hsdp_batch(step);
      sgd.zero_grad();
      hsdp.gather_parameters();
      const at::Tensor loss =
          at::mse_loss(model->forward(x.narrow(0, 2 * rank, 2)), y.narrow(0, 2 * rank, 2));
      loss.backward();
      hsdp.reduce_gradients();
      sgd.step();
      losses[rank].push_back(loss.item<double>());
    }
    dcpp::StateDict state = dcpp::get_model_state_dict(hsdp);
    dcpp::save(state, dir / "ckpt", dcpp::SaveOptions().with_process_group(mesh.world_group()));
    full[rank] = dcpp::get_model_state_dict(
        hsdp, dcpp::StateDictOptions().with_full_state_dict().with_cpu_offload());
  });

  // The global loss of a step is the mean of the ranks' (equal parts).
  for (int step = 0; step < kHsdpSteps; ++step) {
    INFO("step " << step);
    double mean = 0;
    for (int rank = 0; rank < kHsdpRanks; ++rank) mean += losses[rank][step] / kHsdpRanks;
    CHECK(std::abs(mean - single_losses[step]) <= 1e-6 * std::abs(single_losses[step]));
  }
  torch::nn::Sequential fresh = make_hsdp_model();
  dcpp::StateDict loaded = dcpp::get_model_state_dict(*fresh);
  dcpp::load(loaded, dir / "ckpt");
  const dcpp::StateDict trained = dcpp::get_model_state_dict(*single);
  for (const auto& item : trained) {
    INFO(item.key);
    CHECK(at::allclose(loaded.at(item.key).tensor(), item.value.tensor(), 1e-6, 1e-6));
    CHECK(dcpp::test::bitwise_equal(full[0].at(item.key).tensor(), loaded.at(item.key).tensor()));
  }
  for (int rank = 1; rank < kHsdpRanks; ++rank) CHECK(full[rank].size() == 0);
}
