#include "dcpp_test.h"

#include "planner/save_plan_validation.h"

#include <dcpp/core/checkpoint_error.h>
#include <dcpp/planner/save_planner.h>

#include <limits>

using dcpp::SavePlan;
using dcpp::detail::validate_global_save_plan;

namespace {

// Rank plans holding rows [begin, begin + rows) of an 8 x 4 float tensor "w".
SavePlan rows(int64_t begin, int64_t rows, std::vector<int64_t> size = {8, 4},
              at::ScalarType dtype = at::kFloat) {
  dcpp::WriteItem item;
  item.index = dcpp::MetadataIndex{"w", std::vector<int64_t>{begin, 0}, std::nullopt};
  item.type = dcpp::WriteItemType::kShard;
  dcpp::TensorWriteData data;
  data.chunk = dcpp::ChunkStorageMetadata{{begin, 0}, {rows, 4}};
  data.properties.dtype = dtype;
  data.size = std::move(size);
  item.tensor_data = data;
  SavePlan plan;
  plan.items.push_back(item);
  return plan;
}

}  // namespace

TEST_CASE("plans whose chunks tile every tensor pass validation") {
  REQUIRE_NOTHROW(validate_global_save_plan({rows(0, 3), rows(3, 5)}));
  REQUIRE_NOTHROW(validate_global_save_plan({rows(0, 8), SavePlan{}}));
}

TEST_CASE("overlapping chunks are an error naming the key and both ranks") {
  REQUIRE_THROWS_WITH(validate_global_save_plan({rows(0, 4), rows(3, 5)}),
                      Catch::Contains("'w'") && Catch::Contains("rank 1") &&
                          Catch::Contains("rank 0") && Catch::Contains("overlaps"));
}

TEST_CASE("a chunk outside the tensor, a gap and a shape disagreement are errors") {
  REQUIRE_THROWS_WITH(validate_global_save_plan({rows(0, 4), rows(4, 5)}),
                      Catch::Contains("outside") && Catch::Contains("rank 1"));
  REQUIRE_THROWS_WITH(validate_global_save_plan({rows(0, 3), rows(4, 4)}),
                      Catch::Contains("cover 28 of the 32") && Catch::Contains("ranks 0, 1"));
  REQUIRE_THROWS_WITH(validate_global_save_plan({rows(0, 4), rows(4, 4, {9, 4})}),
                      Catch::Contains("[8, 4]") && Catch::Contains("[9, 4]"));
  REQUIRE_THROWS_WITH(validate_global_save_plan({rows(0, 4), rows(4, 4, {8, 4}, at::kDouble)}),
                      Catch::Contains("Float") && Catch::Contains("Double"));
}

TEST_CASE("a chunk whose offset plus size overflows int64 lies outside the tensor") {
  // A plan from another rank is decoded from its message: offsets near INT64_MAX must not wrap
  // around into the tensor.
  const int64_t huge = std::numeric_limits<int64_t>::max();
  REQUIRE_THROWS_WITH(validate_global_save_plan({rows(0, 8), rows(huge, 2)}),
                      Catch::Contains("outside") && Catch::Contains("rank 1"));
}

TEST_CASE("an empty shard at another rank's offset is not taken for a replica of it") {
  // Rank 0 holds rows [0, 5) of a 10 x 2 tensor, rank 1 none (at offset 5), rank 2 rows [5, 10):
  // the default planner must keep rank 2's chunk, not write rank 1's empty one in its place.
  const at::Tensor full = at::arange(20, at::kFloat).reshape({10, 2});
  const std::vector<std::pair<int64_t, int64_t>> pieces = {{0, 5}, {5, 0}, {5, 5}};
  std::vector<SavePlan> plans;
  for (const auto& [begin, rows] : pieces) {
    dcpp::StateDict state;
    state.insert("w", dcpp::ShardedTensor({10, 2}, {{full.narrow(0, begin, rows), {begin, 0}}}));
    auto planner = std::make_shared<dcpp::DefaultSavePlanner>();
    planner->set_up(state, plans.empty());
    plans.push_back(planner->create_local_plan());
  }
  auto planner = std::make_shared<dcpp::DefaultSavePlanner>();
  const auto [global_plans, metadata] = planner->create_global_plan(plans);
  REQUIRE(global_plans.at(1).items.empty());
  REQUIRE(global_plans.at(2).items.size() == 1);
  const auto& tensor =
      std::get<dcpp::TensorStorageMetadata>(metadata.state_dict_metadata.at(0).second);
  REQUIRE(tensor.chunks.size() == 2);
  CHECK(tensor.chunks[1].offsets == std::vector<int64_t>{5, 0});
  CHECK(tensor.chunks[1].sizes == std::vector<int64_t>{5, 2});
}

TEST_CASE("validate_tensor_access: chunks at one offset with different sizes overlap") {
  // Issue 58: rank 0 asking rows [0, 8) of the 8 x 4 tensor and rank 1 rows [0, 4) were taken for
  // replicas (same key, same offsets) and the second left out, so the request passed. A replica is
  // an equal chunk: same offsets and sizes.
  using dcpp::detail::validate_tensor_access;
  const auto require_refused = [](const std::vector<SavePlan>& plans, int first, int second) {
    const dcpp::CheckpointError error =
        dcpp::test::error_of([&] { validate_tensor_access(plans); });
    CHECK(error.kind() == dcpp::ErrorKind::kUsage);
    const std::string message = error.what_without_backtrace();
    CHECK_THAT(message, Catch::Contains("key 'w'") && Catch::Contains("overlaps"));
    CHECK_THAT(message, Catch::Contains("offsets [0, 0] of sizes [8, 4] from rank " +
                                        std::to_string(first)));
    CHECK_THAT(message, Catch::Contains("offsets [0, 0] of sizes [4, 4] from rank " +
                                        std::to_string(second)));
  };
  require_refused({rows(0, 8), rows(0, 4)}, 0, 1);
  require_refused({rows(0, 4), rows(0, 8)}, 1, 0);
  // One rank holding both.
  SavePlan both = rows(0, 8);
  both.items.push_back(rows(0, 4).items.front());
  require_refused({both, SavePlan{}}, 0, 0);
  // Equal chunks on several ranks are replicas, and the whole tensor once is enough.
  REQUIRE_NOTHROW(validate_tensor_access({rows(0, 8), rows(0, 8), rows(0, 8)}));
  REQUIRE_NOTHROW(validate_tensor_access({rows(0, 4), rows(4, 4), rows(0, 4), rows(4, 4)}));
}

TEST_CASE("a gap over many ranks names ten of them and counts the rest") {
  // 40 ranks holding a row each of a 100-row tensor.
  std::vector<SavePlan> plans;
  for (int64_t rank = 0; rank < 40; ++rank) plans.push_back(rows(rank, 1, {100, 4}));
  const dcpp::CheckpointError error =
      dcpp::test::error_of([&] { validate_global_save_plan(plans); });
  CHECK_THAT(error.what(), Catch::Contains("the chunks of ranks 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, "
                                           "... and 30 more cover 160 of the 400 elements"));
}

TEST_CASE(
    "the save planner refuses chunks at one offset of different sizes, not one as a replica") {
  // Rows [0, 8) on rank 0, [0, 4) on rank 1: dedup by key and offsets alone would keep one and
  // drop the other as its replica.
  auto planner = std::make_shared<dcpp::DefaultSavePlanner>();
  try {
    planner->create_global_plan({rows(0, 8), rows(0, 4)});
    FAIL("the overlap was accepted");
  } catch (const dcpp::CheckpointError& error) {
    CHECK(error.kind() == dcpp::ErrorKind::kUsage);
    CHECK_THAT(error.what(),
               Catch::Matchers::StartsWith("key 'w': rank 0's chunk of sizes [8, 4] and rank "
                                           "1's chunk of sizes [4, 4] both start at offsets "
                                           "[0, 0]: they overlap without being equal"));
  }
}
