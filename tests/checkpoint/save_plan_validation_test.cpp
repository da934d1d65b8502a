#include "dcpp_test.h"

#include "save_plan_validation.h"

#include <dcpp/core/checkpoint_error.h>

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
