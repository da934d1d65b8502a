// Optimizer state of sharded parameters over a real 3-rank Gloo group (ranks as threads).

#include "rank_threads.h"
#include "training_helpers.h"

#include <dcpp/checkpoint/checkpointer.h>
#include <dcpp/state_dict/optimizer_state_dict.h>
#include <dcpp/state_dict/stateful_adapters.h>

#include <torch/optim/adam.h>

using dcpp::StateDict;
using dcpp::StateDictOptions;
using dcpp::test::bitwise_equal;

namespace {

constexpr int kShardedRanks = 3;
const std::vector<int64_t> kShardedRowBegin{0, 2, 2, 13};  // uneven: 2, 0 and 11 rows

struct Full {
  at::Tensor weight;
  at::Tensor grad;
};

Full full_tensors() {
  torch::manual_seed(5);
  Full full;
  full.weight = torch::randn({13, 5});
  full.grad = torch::randn({13, 5});
  return full;
}

}  // namespace

TEST_CASE(
    "sharded Adam state is sharded like its parameter, gathers whole, and reshards 3 -> 1 through "
    "a checkpoint") {
  const Full full = full_tensors();
  dcpp::test::TempDir dir;
  std::vector<at::Tensor> local_avg(kShardedRanks), gathered_avg(kShardedRanks),
      flat_avg(kShardedRanks);
  std::vector<std::vector<int64_t>> shard_offsets(kShardedRanks);
  dcpp::test::on_ranks(
      kShardedRanks, "sharded-adam",
      [&](int rank, const c10::intrusive_ptr<c10d::ProcessGroup>& group) {
        const int64_t begin = kShardedRowBegin[rank], rows = kShardedRowBegin[rank + 1] - begin;
        const at::Tensor local = full.weight.narrow(0, begin, rows).clone().requires_grad_(true);
        dcpp::test::ListedLayout layout({dcpp::test::piece("w", local, {13, 5}, {begin, 0})},
                                        group);
        torch::optim::Adam adam({local}, torch::optim::AdamOptions(0.1));
        for (int i = 0; i < 2; ++i) {
          local.mutable_grad() = full.grad.narrow(0, begin, rows).clone();
          adam.step();
        }
        const StateDict sharded = dcpp::get_optimizer_state_dict(layout, adam);
        const StateDict& w = sharded.at("state").dict().at("w").dict();
        // A rank without rows holds no shard (an empty one would share its offset with the next).
        const auto& shards = w.at("exp_avg").sharded_tensor().local_shards();
        if (!shards.empty()) {
          shard_offsets[rank] = shards[0].offsets;
          local_avg[rank] = shards[0].tensor.clone();
        } else {
          local_avg[rank] = at::empty({0, 5});
        }

        const StateDict whole =
            dcpp::get_optimizer_state_dict(layout, adam, StateDictOptions().with_full_state_dict());
        gathered_avg[rank] = whole.at("state").dict().at("w").dict().at("exp_avg").tensor();
        const StateDict flat = dcpp::get_optimizer_state_dict(
            layout, adam,
            StateDictOptions().with_full_state_dict().with_flatten_optimizer_state_dict());
        flat_avg[rank] = flat.at("state.w.exp_avg").tensor();

        StateDict state;
        state.insert("optim", dcpp::make_optimizer_stateful(
                                  std::make_shared<dcpp::test::ListedLayout>(layout),
                                  dcpp::test::borrowed(adam)));
        dcpp::SaveOptions save_options;
        save_options.ranks.process_group = group;
        dcpp::save(state, dir.path(), save_options);
      });

  // The unsharded run, for reference.
  const at::Tensor reference = full.weight.clone().requires_grad_(true);
  torch::optim::Adam reference_adam({reference}, torch::optim::AdamOptions(0.1));
  for (int i = 0; i < 2; ++i) {
    reference.mutable_grad() = full.grad.clone();
    reference_adam.step();
  }
  dcpp::test::ListedLayout single({dcpp::test::whole("w", reference)});
  const at::Tensor reference_avg = dcpp::get_optimizer_state_dict(single, reference_adam)
                                       .at("state")
                                       .dict()
                                       .at("w")
                                       .dict()
                                       .at("exp_avg")
                                       .tensor();

  for (int rank = 0; rank < kShardedRanks; ++rank) {
    INFO("rank " << rank);
    if (kShardedRowBegin[rank + 1] > kShardedRowBegin[rank]) {
      REQUIRE(shard_offsets[rank] == std::vector<int64_t>{kShardedRowBegin[rank], 0});
    } else {
      REQUIRE(shard_offsets[rank].empty());
    }
    // Every rank gathers the same whole tensor, made of every rank's own shard.
    REQUIRE(bitwise_equal(gathered_avg[rank], gathered_avg[0]));
    REQUIRE(bitwise_equal(flat_avg[rank], gathered_avg[0]));
    REQUIRE(
        bitwise_equal(gathered_avg[0].narrow(0, kShardedRowBegin[rank],
                                             kShardedRowBegin[rank + 1] - kShardedRowBegin[rank]),
                      local_avg[rank]));
  }
  REQUIRE(at::allclose(gathered_avg[0], reference_avg, 1e-6, 1e-7));

  // Resharded 3 -> 1: a fresh single-process Adam takes the checkpoint (step included).
  const at::Tensor resumed = full.weight.clone().requires_grad_(true);
  torch::optim::Adam resumed_adam({resumed}, torch::optim::AdamOptions(0.5));
  auto resumed_layout = std::make_shared<dcpp::test::ListedLayout>(
      std::vector<dcpp::ParameterPlacement>{dcpp::test::whole("w", resumed)});
  StateDict target;
  target.insert("optim",
                dcpp::make_optimizer_stateful(resumed_layout, dcpp::test::borrowed(resumed_adam)));
  dcpp::load(target, dir.path());
  const StateDict after = dcpp::get_optimizer_state_dict(*resumed_layout, resumed_adam);
  const StateDict& w = after.at("state").dict().at("w").dict();
  REQUIRE(bitwise_equal(w.at("exp_avg").tensor(), gathered_avg[0]));
  REQUIRE(w.at("step").tensor().item<float>() == 2.0f);
  REQUIRE(resumed_adam.param_groups()[0].options().get_lr() == 0.1);
}
