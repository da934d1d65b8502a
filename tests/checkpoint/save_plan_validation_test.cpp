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
