// The replica check (SaveOptions::replica_check): ranks that list the same item with different
// bytes fail the save on every rank before anything is committed, with the keys and the ranks
// that disagree; kWarn commits with a warning, kOff does not look; plan caching keeps the check.
// Ranks are threads of this process (rank_threads.h).

#include "dcpp_test.h"
#include "rank_threads.h"

#include "checkpoint/replicated_items.h"
#include "core/logging.h"
#include "format/byte_io.h"
#include "format/content_checksum.h"
#include "format/item_codec.h"

#include <dcpp/dcpp.h>

#include <spdlog/sinks/ringbuffer_sink.h>

#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/adam.h>

#include <algorithm>
#include <set>

namespace fs = std::filesystem;
using dcpp::test::bitwise_equal;
using dcpp::test::loopback_group;
using dcpp::test::on_rank_threads;
using dcpp::test::TempDir;

namespace {

// Fills every parameter of `module` with values of its own, derived from `seed` (not from the
// global generator, which the rank threads share).
void fill_parameters(torch::nn::Module& module, double seed) {
  torch::NoGradGuard no_grad;
  for (at::Tensor& parameter : module.parameters()) {
    parameter.copy_(at::arange(parameter.numel(), at::kFloat).reshape(parameter.sizes()) / 7 +
                    seed);
    seed += 100;
  }
}

// A tensor-parallel layer: each tensor-parallel rank holds its 3 of the layer's output rows.
struct Block : torch::nn::Module {
  explicit Block(int tp_rank) {
    proj = register_module("proj", torch::nn::Linear(4, 3));
    fill_parameters(*this, tp_rank);
  }
  torch::nn::Linear proj{nullptr};
};

dcpp::SaveOptions save_options(c10::intrusive_ptr<c10d::ProcessGroup> group,
                               dcpp::ReplicaCheck check) {
  dcpp::SaveOptions options;
  options.file_system.sync_files = false;
  options.ranks.process_group = std::move(group);
  options.replica_check = check;
  return options;
}

// 2-way tensor parallel x 2-way data parallel on 4 ranks (tensor-parallel rank = rank % 2), saved
// with the mistake of issue 35: DataParallel over the data-parallel group as the layout, so every
// rank lists its tensor-parallel shard as the whole "proj.weight". Returns each rank's error
// message ("" when its save returned) and its proj.weight.
struct TpDpRun {
  std::vector<std::string> errors = std::vector<std::string>(4);
  std::vector<dcpp::ErrorKind> kinds = std::vector<dcpp::ErrorKind>(4, dcpp::ErrorKind::kIo);
  std::vector<at::Tensor> weights = std::vector<at::Tensor>(4);
};

TpDpRun save_tp_dp_through_a_dp_layout(const fs::path& dir, dcpp::ReplicaCheck check) {
  TpDpRun run;
  on_rank_threads(4, [&](int rank, const c10::intrusive_ptr<c10d::Store>& store) {
    const int tp = rank % 2, dp = rank / 2;
    auto world = loopback_group(store, rank, 4, "world");
    auto dp_group = loopback_group(store, dp, 2, "dp" + std::to_string(tp));
    auto block = std::make_shared<Block>(tp);
    const dcpp::DataParallel layout(block, dp_group);
    run.weights[rank] = block->proj->weight.detach().clone();
    try {
      dcpp::save(dcpp::get_model_state_dict(layout), dir, save_options(world, check));
    } catch (const dcpp::CheckpointError& error) {
      run.errors[rank] = error.what();
      run.kinds[rank] = error.kind();
    }
  });
  return run;
}

}  // namespace

TEST_CASE("a tensor-parallel shard saved as a data-parallel replica fails the save on every rank") {
  TempDir dir;
  const TpDpRun run = save_tp_dp_through_a_dp_layout(dir.path(), dcpp::ReplicaCheck::kFail);
  REQUIRE_FALSE(bitwise_equal(run.weights[0], run.weights[1]));  // the shards differ
  for (int rank = 0; rank < 4; ++rank) {
    INFO("rank " << rank);
    CHECK(run.kinds[rank] == dcpp::ErrorKind::kUsage);
    CHECK(run.errors[rank] == run.errors[0]);
  }
  CHECK_THAT(run.errors[0],
             Catch::Contains("2 items that several ranks hold have different bytes"));
  CHECK_THAT(run.errors[0], Catch::Contains("'proj.weight': ranks 0, 2 / ranks 1, 3"));
  CHECK_THAT(run.errors[0], Catch::Contains("'proj.bias': ranks 0, 2 / ranks 1, 3"));
  CHECK_THAT(run.errors[0], Catch::Contains("lists a shard as a whole tensor"));
  CHECK_FALSE(fs::exists(dir / ".metadata"));
}

TEST_CASE("with ReplicaCheck::kWarn the save commits, warns, and keeps one rank's copy") {
  auto ring = std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(64);
  dcpp::detail::logger().sinks().push_back(ring);
  TempDir dir;
  const TpDpRun run = save_tp_dp_through_a_dp_layout(dir.path(), dcpp::ReplicaCheck::kWarn);
  dcpp::detail::logger().sinks().pop_back();
  for (const std::string& error : run.errors) {
    CHECK(error.empty());
  }
  const std::vector<std::string> logged = ring->last_formatted();
  CHECK(std::count_if(logged.begin(), logged.end(), [](const std::string& line) {
          return line.find("'proj.weight': ranks 0, 2 / ranks 1, 3") != std::string::npos &&
                 line.find("replica_check is kWarn: committing anyway") != std::string::npos;
        }) == 1);
  const at::Tensor saved = dcpp::load_from_keys(dir.path()).at("proj.weight").tensor();
  CHECK((bitwise_equal(saved, run.weights[0]) || bitwise_equal(saved, run.weights[1])));
}

TEST_CASE("with ReplicaCheck::kOff the save commits without comparing") {
  TempDir dir;
  const TpDpRun run = save_tp_dp_through_a_dp_layout(dir.path(), dcpp::ReplicaCheck::kOff);
  for (const std::string& error : run.errors) {
    CHECK(error.empty());
  }
  CHECK(fs::exists(dir / ".metadata"));
}

TEST_CASE("plan caching keeps the replica check, and agreeing replicas save and load back") {
  // Two data-parallel ranks; in the third save rank 1's "w" and "step" drift from rank 0's.
  TempDir dir;
  std::vector<std::string> errors(2);
  std::vector<int64_t> reused(2), full(2);
  const at::Tensor w = at::arange(24, at::kFloat).reshape({4, 6}) / 7;
  on_rank_threads(2, [&](int rank, const c10::intrusive_ptr<c10d::Store>& store) {
    auto group = loopback_group(store, rank, 2, "ddp");
    auto cache = std::make_shared<dcpp::SavePlanCache>();
    auto state = [&](int save) {
      dcpp::StateDict dict;
      const bool drift = save == 3 && rank == 1;
      dict.insert("w", drift ? w + 1e-6 : w.clone());
      dict.insert("step", c10::IValue(static_cast<int64_t>(drift ? save + 1 : save)));
      return dict;
    };
    for (int save = 1; save <= 4; ++save) {
      dcpp::SaveOptions options = save_options(group, dcpp::ReplicaCheck::kFail);
      options.plan_cache = cache;
      options.file_system.overwrite = true;
      try {
        dcpp::save(state(save), dir / std::to_string(save), options);
      } catch (const dcpp::CheckpointError& error) {
        errors[rank] += "save " + std::to_string(save) + ": " + error.what();
      }
    }
    reused[rank] = cache->reused_plans();
    full[rank] = cache->full_plans();
  });
  for (int rank = 0; rank < 2; ++rank) {
    INFO("rank " << rank);
    CHECK(errors[rank].rfind("save 3: ", 0) == 0);
    CHECK_THAT(errors[rank], Catch::Contains("'w': rank 0 / rank 1"));
    CHECK_THAT(errors[rank], Catch::Contains("'step': rank 0 / rank 1"));
    CHECK(full[rank] == 1);
    CHECK(reused[rank] == 2);  // saves 2 and 4; the failed save 3 is not counted
  }
  CHECK_FALSE(fs::exists(dir / "3" / ".metadata"));
  const dcpp::StateDict loaded = dcpp::load_from_keys(dir / "4");
  CHECK(bitwise_equal(loaded.at("w").tensor(), w));
  CHECK(loaded.at("step").value().toInt() == 4);
}

TEST_CASE("the same shard on several ranks is compared too") {
  // A 4-element tensor: both ranks hold [0, 2) (replicated), rank 0 holds [2, 3), rank 1 [3, 4).
  TempDir dir;
  std::vector<std::string> errors(2);
  on_rank_threads(2, [&](int rank, const c10::intrusive_ptr<c10d::Store>& store) {
    auto group = loopback_group(store, rank, 2, "hsdp");
    std::vector<dcpp::Shard> shards{{at::full({2}, 1.0f + static_cast<float>(rank)), {0}},
                                    {at::full({1}, 9.0f), {2 + rank}}};
    dcpp::StateDict dict;
    dict.insert("s", dcpp::ShardedTensor({4}, shards));
    try {
      dcpp::save(dict, dir.path(), save_options(group, dcpp::ReplicaCheck::kFail));
    } catch (const dcpp::CheckpointError& error) {
      errors[rank] = error.what();
    }
  });
  CHECK(errors[0] == errors[1]);
  CHECK_THAT(errors[0], Catch::Contains("1 item that several ranks hold has different bytes"));
  CHECK_THAT(errors[0], Catch::Contains("'s' (chunk at [0]): rank 0 / rank 1"));
}

TEST_CASE("replicas agree through compression, strides and dtypes, and one drifting is caught") {
  // Two data-parallel ranks; each writes half the items, so each item's two checksums come one
  // from its writer's results (or, for the transposed tensor, hashed after the write) and one
  // hashed while writing.
  const at::Tensor matrix = at::arange(30, at::kFloat).reshape({5, 6});
  for (const bool drift : {false, true}) {
    INFO("drift " << drift);
    TempDir dir;
    std::vector<std::string> errors(2);
    on_rank_threads(2, [&](int rank, const c10::intrusive_ptr<c10d::Store>& store) {
      auto group = loopback_group(store, rank, 2, "ddp");
      dcpp::StateDict dict;
      dict.insert("transposed", matrix.t());  // dense, but not row-major
      dict.insert("bf16", matrix.to(at::kBFloat16));
      dict.insert("empty", at::empty({0, 3}));
      dict.insert("slice", matrix.narrow(1, 2, 3));  // a view of part of its storage
      dict.insert("config", c10::IValue(std::string("lr=0.1")));
      if (drift && rank == 1) {
        dict.insert_or_assign("transposed", (matrix * 2).t());
      }
      dcpp::SaveOptions options = save_options(group, dcpp::ReplicaCheck::kFail);
      options.file_system.compression = dcpp::Compression::kZstd;
      try {
        dcpp::save(dict, dir.path(), options);
      } catch (const dcpp::CheckpointError& error) {
        errors[rank] = error.what();
      }
    });
    if (!drift) {
      CHECK(errors[0].empty());
      CHECK(errors[1].empty());
      CHECK(bitwise_equal(dcpp::load_from_keys(dir.path()).at("transposed").tensor(), matrix.t()));
    } else {
      CHECK_THAT(errors[0], Catch::Contains("1 item that several ranks hold has different bytes"));
      CHECK_THAT(errors[0], Catch::Contains("'transposed': rank 0 / rank 1"));
    }
  }
}

TEST_CASE("the writer's content checksum is the content checksum of what it wrote") {
  const at::Tensor matrix = at::arange(30, at::kFloat).reshape({5, 6});
  for (const at::Tensor& tensor :
       {matrix, matrix.to(at::kBFloat16), at::empty({0, 3}), matrix.narrow(1, 2, 3), matrix.t()}) {
    INFO(tensor.sizes() << " " << tensor.scalar_type() << " contiguous " << tensor.is_contiguous());
    dcpp::detail::MemorySink sink;
    const dcpp::detail::WrittenItem written = dcpp::detail::write_tensor_item(sink, tensor);
    if (tensor.is_contiguous() || !tensor.t().is_contiguous()) {
      REQUIRE(written.content_crc32.has_value());  // a view of part of its storage is compacted
      CHECK(*written.content_crc32 == dcpp::detail::content_crc32(tensor));
    } else {
      CHECK_FALSE(written.content_crc32.has_value());  // written in its own strides' order
    }
  }
  // The same bytes in another shape or dtype are other contents.
  CHECK(dcpp::detail::content_crc32(matrix) != dcpp::detail::content_crc32(matrix.reshape({6, 5})));
  CHECK(dcpp::detail::content_crc32(matrix) != dcpp::detail::content_crc32(matrix.view(at::kInt)));
  CHECK(dcpp::detail::content_crc32(matrix.t()) ==
        dcpp::detail::content_crc32(matrix.t().contiguous()));
}

TEST_CASE("a pipeline's nested optimizer param groups differ per stage; flattened, they save") {
  // Two stages of a 2-module model: each stage's param group lists its own parameters.
  TempDir dir;
  std::vector<std::string> nested_errors(2);
  std::vector<char> flattened_saved(2, 0);  // not vector<bool>: its bits share words
  on_rank_threads(2, [&](int rank, const c10::intrusive_ptr<c10d::Store>& store) {
    auto group = loopback_group(store, rank, 2, "pp");
    torch::nn::Sequential model(torch::nn::Linear(3, 3), torch::nn::Linear(3, 2));
    fill_parameters(*model, 0);
    const dcpp::PipelineStage stage(dcpp::PipelineStage::slice(model, rank, rank + 1), rank, group);
    torch::optim::Adam optimizer(stage.parameters(), torch::optim::AdamOptions(1e-2));
    for (const bool flatten : {false, true}) {
      const auto state_options =
          dcpp::StateDictOptions().with_flatten_optimizer_state_dict(flatten);
      dcpp::StateDict state;
      state.insert("model", dcpp::get_model_state_dict(stage));
      state.insert("optim", dcpp::get_optimizer_state_dict(stage, optimizer, state_options));
      try {
        dcpp::save(state, dir / (flatten ? "flat" : "nested"),
                   save_options(group, dcpp::ReplicaCheck::kFail));
        flattened_saved[rank] = flatten;
      } catch (const dcpp::CheckpointError& error) {
        nested_errors[rank] = flatten ? "flattened failed: " : "";
        nested_errors[rank] += error.what();
      }
    }
  });
  CHECK(nested_errors[0] == nested_errors[1]);
  CHECK_THAT(nested_errors[0], Catch::Contains("'optim.param_groups.0.params': rank 0 / rank 1"));
  CHECK_THAT(nested_errors[0], Catch::Contains("StateDictOptions::flatten_optimizer_state_dict"));
  CHECK(flattened_saved[0]);
  CHECK(flattened_saved[1]);
}

TEST_CASE(
    "the coordinator marks each rank's replicated items and names the first five that differ") {
  // Three ranks, 12 items each: items 0-9 on every rank, "own<rank>-*" on one rank only.
  std::vector<dcpp::SavePlan> plans(3);
  for (int rank = 0; rank < 3; ++rank) {
    for (int i = 0; i < 12; ++i) {
      dcpp::WriteItem item;
      item.index.fqn =
          i < 10 ? "k" + std::to_string(i) : "own" + std::to_string(rank) + "-" + std::to_string(i);
      plans[rank].items.push_back(item);
    }
    std::reverse(plans[rank].items.begin() + rank, plans[rank].items.end());  // other orders
  }
  const dcpp::detail::ReplicatedItems replicated = dcpp::detail::find_replicated_items(plans);
  REQUIRE(replicated.items.size() == 10);
  std::vector<std::vector<uint32_t>> checksums(3);
  for (int rank = 0; rank < 3; ++rank) {
    INFO("rank " << rank);
    const std::vector<std::size_t> positions =
        dcpp::detail::decode_marks(replicated.marks[rank], 12);
    REQUIRE(positions.size() == 10);
    REQUIRE(replicated.of_rank[rank].size() == 10);
    for (std::size_t n = 0; n < positions.size(); ++n) {
      const std::string& key = plans[rank].items[positions[n]].index.fqn;
      CHECK(key.rfind("k", 0) == 0);
      CHECK(replicated.items[replicated.of_rank[rank][n]].fqn == key);
      // Rank 2 differs on k3 to k9, rank 1 on k9 as well.
      const int k = std::stoi(key.substr(1));
      checksums[rank].push_back((rank == 2 && k >= 3) || (rank == 1 && k == 9) ? rank : 0);
    }
  }
  CHECK(dcpp::detail::decode_marks("", 12).empty());
  CHECK_THROWS_AS(dcpp::detail::decode_marks(replicated.marks[0], 20), dcpp::CheckpointError);

  const std::string message = dcpp::detail::describe_differing_replicas(replicated, checksums);
  CHECK_THAT(message, Catch::Contains("7 items that several ranks hold have different bytes"));
  CHECK_THAT(message, Catch::Contains("'k9': rank 0 / rank 1 / rank 2"));
  CHECK_THAT(message, Catch::Contains("'k5': ranks 0, 1 / rank 2"));
  CHECK_THAT(message, Catch::Contains("; and 2 more."));
  checksums[2].assign(10, 0);
  checksums[1].assign(10, 0);
  CHECK(dcpp::detail::describe_differing_replicas(replicated, checksums).empty());
  checksums[1].pop_back();
  CHECK_THROWS_AS(dcpp::detail::describe_differing_replicas(replicated, checksums),
                  dcpp::CheckpointError);
}

TEST_CASE("a replica mismatch over many ranks names ten ranks per group and ten groups") {
  // 40 ranks hold "w": ranks 0-19 agree, ranks 20-39 each differ from all others.
  constexpr int kRanks = 40;
  std::vector<dcpp::SavePlan> plans(kRanks);
  for (auto& plan : plans) {
    dcpp::WriteItem item;
    item.index.fqn = "w";
    plan.items.push_back(item);
  }
  const dcpp::detail::ReplicatedItems replicated = dcpp::detail::find_replicated_items(plans);
  std::vector<std::vector<uint32_t>> checksums(kRanks);
  for (int rank = 0; rank < kRanks; ++rank) {
    checksums[rank].push_back(rank < 20 ? 0 : static_cast<uint32_t>(rank));
  }
  const std::string message = dcpp::detail::describe_differing_replicas(replicated, checksums);
  CHECK_THAT(message, Catch::Contains("'w': ranks 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, ... and 10 more / "
                                      "rank 20 / rank 21 /"));
  CHECK_THAT(message, Catch::Contains("rank 28 / ... and 11 more groups"));
  CHECK(message.find("rank 29") == std::string::npos);
}
