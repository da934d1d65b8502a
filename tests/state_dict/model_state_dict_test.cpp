#include "rank_threads.h"
#include "training_helpers.h"

#include <dcpp/checkpoint/checkpointer.h>
#include <dcpp/core/checkpoint_error.h>
#include <dcpp/dist/process_group.h>
#include <dcpp/state_dict/model_state_dict.h>
#include <dcpp/state_dict/plain_layout.h>
#include <dcpp/state_dict/stateful_adapters.h>

#include <torch/nn/modules/batchnorm.h>

using dcpp::StateDict;
using dcpp::StateDictOptions;
using dcpp::test::bitwise_equal;
using dcpp::test::ListedLayout;
using dcpp::test::piece;
using dcpp::test::whole;

namespace {

std::vector<std::string> keys_of(const StateDict& dict) {
  std::vector<std::string> keys;
  for (const auto& item : dict) {
    keys.push_back(item.key);
  }
  return keys;
}

}  // namespace

TEST_CASE("the plain layout names parameters and buffers as Python does") {
  torch::nn::Sequential model(torch::nn::Linear(2, 3), torch::nn::BatchNorm1d(3));
  const StateDict sd = dcpp::get_model_state_dict(*model);
  REQUIRE(keys_of(sd) == std::vector<std::string>{"0.weight", "0.bias", "1.weight", "1.bias",
                                                  "1.running_mean", "1.running_var",
                                                  "1.num_batches_tracked"});
  // Detached views of the model's tensors: writing into them writes into the model.
  REQUIRE_FALSE(sd.at("0.weight").tensor().requires_grad());
  sd.at("0.weight").tensor().fill_(3);
  REQUIRE(model->named_parameters()["0.weight"].eq(3).all().item<bool>());
}

TEST_CASE("set_model_state_dict copies in place, bit for bit") {
  auto source = dcpp::test::small_model(1);
  auto target = dcpp::test::small_model(2);
  const at::Tensor weight_before = target->named_parameters()["0.weight"];
  const auto keys = dcpp::set_model_state_dict(*target, dcpp::get_model_state_dict(*source));
  REQUIRE(keys.missing_keys.empty());
  REQUIRE(keys.unexpected_keys.empty());
  for (const auto& item : source->named_parameters()) {
    REQUIRE(bitwise_equal(item.value(), target->named_parameters()[item.key()]));
  }
  // The same tensor, written in place.
  REQUIRE(target->named_parameters()["0.weight"].unsafeGetTensorImpl() ==
          weight_before.unsafeGetTensorImpl());
}

TEST_CASE("strict set lists missing and unexpected keys and changes nothing") {
  auto model = dcpp::test::small_model(1);
  StateDict sd = dcpp::get_model_state_dict(*dcpp::test::small_model(2));
  sd.erase("2.bias");
  sd.insert("3.weight", at::zeros({2}));
  const at::Tensor before = model->named_parameters()["0.weight"].clone();
  REQUIRE_THROWS_WITH(dcpp::set_model_state_dict(*model, sd),
                      Catch::Contains("Missing keys") && Catch::Contains("'2.bias'") &&
                          Catch::Contains("Unexpected keys") && Catch::Contains("'3.weight'") &&
                          Catch::Contains("strict = false"));
  REQUIRE(bitwise_equal(model->named_parameters()["0.weight"], before));

  const auto keys = dcpp::set_model_state_dict(*model, sd, StateDictOptions().with_strict(false));
  REQUIRE(keys.missing_keys == std::vector<std::string>{"2.bias"});
  REQUIRE(keys.unexpected_keys == std::vector<std::string>{"3.weight"});
  REQUIRE(bitwise_equal(model->named_parameters()["0.weight"], sd.at("0.weight").tensor()));
}

TEST_CASE("set_model_state_dict names the key of a shape mismatch or a non-tensor") {
  auto model = dcpp::test::small_model(1);
  StateDict sd = dcpp::get_model_state_dict(*model);
  sd.insert_or_assign("0.bias", at::zeros({7}));
  REQUIRE_THROWS_WITH(dcpp::set_model_state_dict(*model, sd), Catch::Contains("'0.bias'") &&
                                                                  Catch::Contains("[7]") &&
                                                                  Catch::Contains("[8]"));
  sd.insert_or_assign("0.bias", 3);
  REQUIRE_THROWS_WITH(dcpp::set_model_state_dict(*model, sd),
                      Catch::Contains("'0.bias'") && Catch::Contains("not a tensor"));
}

TEST_CASE("ignore_frozen_params leaves frozen parameters out and does not miss them") {
  auto model = dcpp::test::small_model(1);
  model->named_parameters()["0.weight"].set_requires_grad(false);
  const auto options = StateDictOptions().with_ignore_frozen_params(true);
  const StateDict sd = dcpp::get_model_state_dict(*model, options);
  REQUIRE(keys_of(sd) == std::vector<std::string>{"0.bias", "2.weight", "2.bias"});
  REQUIRE(dcpp::set_model_state_dict(*model, sd, options).missing_keys.empty());
  REQUIRE_THROWS_WITH(dcpp::set_model_state_dict(*model, sd), Catch::Contains("'0.weight'"));
}

TEST_CASE("sharded placements become sharded tensors sharing the local storage") {
  const at::Tensor full = at::arange(24, at::kFloat).reshape({6, 4});
  const at::Tensor local = full.narrow(0, 2, 3).clone();
  const at::Tensor bias = at::ones({4});
  ListedLayout layout({piece("w", local, {6, 4}, {2, 0}), whole("b", bias)});
  const StateDict sd = dcpp::get_model_state_dict(layout);
  const auto& sharded = sd.at("w").sharded_tensor();
  REQUIRE(sharded.global_shape() == std::vector<int64_t>{6, 4});
  REQUIRE(sharded.local_shards().size() == 1);
  REQUIRE(sharded.local_shards()[0].offsets == std::vector<int64_t>{2, 0});
  REQUIRE(sharded.local_shards()[0].tensor.data_ptr() == local.data_ptr());
  REQUIRE(sd.at("b").tensor().data_ptr() == bias.data_ptr());

  // From a whole tensor, the shard takes its rows; from a sharded tensor, its own shard.
  StateDict from_full;
  from_full.insert("w", full * 2);
  from_full.insert("b", at::zeros({4}));
  dcpp::set_model_state_dict(layout, from_full);
  REQUIRE(bitwise_equal(local, (full * 2).narrow(0, 2, 3)));
  REQUIRE(bitwise_equal(bias, at::zeros({4})));

  StateDict from_sharded;
  from_sharded.insert("w",
                      dcpp::ShardedTensor({6, 4}, {dcpp::Shard{full.narrow(0, 1, 5), {1, 0}}}));
  from_sharded.insert("b", at::ones({4}));
  dcpp::set_model_state_dict(layout, from_sharded);
  REQUIRE(bitwise_equal(local, full.narrow(0, 2, 3)));

  StateDict elsewhere;
  elsewhere.insert("w", dcpp::ShardedTensor({6, 4}, {dcpp::Shard{full.narrow(0, 0, 2), {0, 0}}}));
  elsewhere.insert("b", at::ones({4}));
  REQUIRE_THROWS_WITH(dcpp::set_model_state_dict(layout, elsewhere),
                      Catch::Contains("'w'") && Catch::Contains("no local shard covering"));
}

TEST_CASE("full_state_dict on one process needs the whole tensor") {
  const at::Tensor local = at::ones({3, 4});
  ListedLayout layout({piece("w", local, {6, 4}, {2, 0})});
  REQUIRE_THROWS_WITH(
      dcpp::get_model_state_dict(layout, StateDictOptions().with_full_state_dict(true)),
      Catch::Contains("'w'") && Catch::Contains("12 of its 24 elements"));
  ListedLayout covering({piece("w", local, {3, 4}, {0, 0})});
  const StateDict sd =
      dcpp::get_model_state_dict(covering, StateDictOptions().with_full_state_dict(true));
  REQUIRE(bitwise_equal(sd.at("w").tensor(), local));
}

TEST_CASE("the model Stateful saves and loads through dcpp") {
  dcpp::test::TempDir dir;
  auto source = dcpp::test::small_model(1);
  StateDict saved;
  saved.insert("model", dcpp::make_model_stateful(dcpp::plain_layout(*source)));
  dcpp::save(saved, dir.path());
  auto target = dcpp::test::small_model(2);
  StateDict loaded;
  loaded.insert("model", dcpp::make_model_stateful(dcpp::plain_layout(*target)));
  dcpp::load(loaded, dir.path());
  for (const auto& item : source->named_parameters()) {
    REQUIRE(bitwise_equal(item.value(), target->named_parameters()[item.key()]));
  }
}

// ---- Over a real process group: 3 ranks as threads, Gloo on loopback -----------------------

namespace {

constexpr int kRanks = 3;

template <typename Body>
void on_ranks(const std::string& name, Body body) {
  dcpp::test::on_ranks(kRanks, name, body);
}

// Rows [0, 0), [0, 4), [4, 13) of a 13 x 5 tensor: uneven, one rank empty; columns 0-1, 2-3, 4
// of a 3 x 5 bfloat16 one.
const std::vector<int64_t> kRowBegin{0, 0, 4, 13};
const std::vector<int64_t> kColBegin{0, 2, 4, 5};

at::Tensor rows_full() { return at::arange(65, at::kFloat).reshape({13, 5}) / 7; }
at::Tensor cols_full() {
  return (at::arange(15, at::kFloat).reshape({3, 5}) / 3).to(at::kBFloat16);
}

}  // namespace

TEST_CASE(
    "full_state_dict gathers uneven shards over a process group, broadcast_from_rank0 scatters "
    "them") {
  std::vector<StateDict> gathered(kRanks), offloaded(kRanks);
  std::vector<at::Tensor> rows_after(kRanks), cols_after(kRanks), replicated_after(kRanks);
  on_ranks("full-state-dict", [&](int rank, const c10::intrusive_ptr<c10d::ProcessGroup>& group) {
    const int64_t r0 = kRowBegin[rank], r1 = kRowBegin[rank + 1];
    const int64_t c0 = kColBegin[rank], c1 = kColBegin[rank + 1];
    const at::Tensor rows = rows_full().narrow(0, r0, r1 - r0).clone();
    const at::Tensor cols = cols_full().narrow(1, c0, c1 - c0).clone();
    const at::Tensor replicated = at::full({2}, 1.5);
    ListedLayout layout({piece("rows", rows, {13, 5}, {r0, 0}),
                         piece("cols", cols, {3, 5}, {0, c0}), whole("replicated", replicated)},
                        group);
    gathered[rank] =
        dcpp::get_model_state_dict(layout, StateDictOptions().with_full_state_dict(true));
    // Whole tensors are not copied: keep what the replicated one held before the set below.
    gathered[rank].insert_or_assign("replicated", gathered[rank].at("replicated").tensor().clone());
    offloaded[rank] = dcpp::get_model_state_dict(
        layout, StateDictOptions().with_full_state_dict(true).with_cpu_offload(true));

    StateDict from_rank0;
    if (rank == 0) {
      from_rank0.insert("rows", rows_full() * -1);
      from_rank0.insert("cols", cols_full() * 2);
      from_rank0.insert("replicated", at::full({2}, 4.0));
    }
    dcpp::set_model_state_dict(
        layout, from_rank0,
        StateDictOptions().with_full_state_dict(true).with_broadcast_from_rank0(true));
    rows_after[rank] = rows;
    cols_after[rank] = cols;
    replicated_after[rank] = replicated;
  });
  for (int rank = 0; rank < kRanks; ++rank) {
    INFO("rank " << rank);
    REQUIRE(bitwise_equal(gathered[rank].at("rows").tensor(), rows_full()));
    REQUIRE(bitwise_equal(gathered[rank].at("cols").tensor(), cols_full()));
    REQUIRE(bitwise_equal(gathered[rank].at("replicated").tensor(), at::full({2}, 1.5)));
    // With cpu_offload, rank 0 alone keeps the full state dict (DCP's rule).
    if (rank == 0) {
      REQUIRE(bitwise_equal(offloaded[rank].at("rows").tensor(), rows_full()));
    } else {
      REQUIRE(offloaded[rank].empty());
    }
    const int64_t r0 = kRowBegin[rank], r1 = kRowBegin[rank + 1];
    const int64_t c0 = kColBegin[rank], c1 = kColBegin[rank + 1];
    REQUIRE(bitwise_equal(rows_after[rank], (rows_full() * -1).narrow(0, r0, r1 - r0)));
    REQUIRE(bitwise_equal(cols_after[rank], (cols_full() * 2).narrow(1, c0, c1 - c0)));
    REQUIRE(bitwise_equal(replicated_after[rank], at::full({2}, 4.0)));
  }
}

TEST_CASE(
    "broadcast_from_rank0 of a state dict rank 0 cannot send fails on every rank, naming the key") {
  std::vector<std::string> messages(kRanks);
  std::vector<dcpp::ErrorKind> kinds(kRanks, dcpp::ErrorKind::kIo);
  std::vector<at::Tensor> after(kRanks);
  dcpp::test::on_rank_threads(kRanks, [&](int rank, const c10::intrusive_ptr<c10d::Store>& store) {
    // A short timeout: a rank left waiting for rank 0's bytes fails the test in seconds.
    const auto group = dcpp::make_gloo_process_group(store, rank, kRanks,
                                                     dcpp::ProcessGroupOptions()
                                                         .with_group_name("unsendable")
                                                         .with_gloo_hostname("127.0.0.1")
                                                         .with_timeout(std::chrono::seconds(20)));
    const at::Tensor rows = at::zeros({kRowBegin[rank + 1] - kRowBegin[rank], 5});
    ListedLayout layout({piece("rows", rows, {13, 5}, {kRowBegin[rank], 0})}, group);
    StateDict from_rank0;
    if (rank == 0) {  // rank 0 holds a shard, not the full state dict the broadcast needs
      dcpp::StateDict nested;
      nested.insert("rows", dcpp::ShardedTensor::from_chunk_of(rows_full(), 0, 0, kRanks));
      from_rank0.insert("model", std::move(nested));
    }
    try {
      dcpp::set_model_state_dict(
          layout, from_rank0,
          StateDictOptions().with_full_state_dict(true).with_broadcast_from_rank0(true));
    } catch (const dcpp::CheckpointError& error) {
      kinds[rank] = error.kind();
      messages[rank] = error.what();
    }
    after[rank] = rows;
  });
  for (int rank = 0; rank < kRanks; ++rank) {
    INFO("rank " << rank);
    CHECK(kinds[rank] == dcpp::ErrorKind::kUsage);
    CHECK_THAT(messages[rank],
               Catch::Contains("broadcast_from_rank0 on rank 0: key "
                               "'model.rows' holds a sharded tensor, not a whole tensor or value; "
                               "rank 0 must hold a full state dict"));
    CHECK(bitwise_equal(after[rank], at::zeros_like(after[rank])));  // nothing was set
  }
}

TEST_CASE("full_state_dict fails on every rank when the ranks list different sharded tensors") {
  std::vector<std::string> messages(kRanks);
  on_ranks("mismatch", [&](int rank, const c10::intrusive_ptr<c10d::ProcessGroup>& group) {
    std::vector<dcpp::ParameterPlacement> placements{
        piece("w", at::ones({1, 2}), {3, 2}, {rank, 0})};
    if (rank == 1) {
      placements.push_back(piece("extra", at::ones({1}), {3}, {1}));
    }
    ListedLayout layout(placements, group);
    try {
      dcpp::get_model_state_dict(layout, StateDictOptions().with_full_state_dict(true));
    } catch (const dcpp::CheckpointError& error) {
      messages[rank] = error.what();
    }
  });
  for (int rank = 0; rank < kRanks; ++rank) {
    INFO("rank " << rank);
    REQUIRE_THAT(messages[rank], Catch::Contains("must list the same sharded tensors"));
  }
}
