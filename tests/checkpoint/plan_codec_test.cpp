// The messages ranks exchange: enumerators out of range are malformed messages, not values
// wrapped into range.

#include "dcpp_test.h"

#include "planner/plan_codec.h"

#include <dcpp/core/checkpoint_error.h>

namespace {

dcpp::SavePlan save_plan(at::ScalarType dtype) {
  dcpp::WriteItem item;
  item.index.fqn = "model.layer.bias";  // 16 bytes: the fields after it stay 8-aligned
  item.type = dcpp::WriteItemType::kTensor;
  dcpp::TensorWriteData data;
  data.chunk.offsets = {0};
  data.chunk.sizes = {4};
  data.properties.dtype = dtype;
  data.size = {4};
  item.tensor_data = data;
  dcpp::SavePlan plan;
  plan.items.push_back(item);
  return plan;
}

// The offset of the only 8-byte field where `a` and `b` differ.
std::size_t field_where_they_differ(const std::string& a, const std::string& b) {
  REQUIRE(a.size() == b.size());
  std::size_t at = 0;
  while (at < a.size() && a[at] == b[at]) ++at;
  REQUIRE(at < a.size());
  return at - at % 8;  // the fields are 8-byte aligned from the message's start
}

std::string with_field(std::string bytes, std::size_t offset, uint64_t value) {
  for (int i = 0; i < 8; ++i) bytes[offset + i] = static_cast<char>(value >> (8 * i));
  return bytes;
}

}  // namespace

TEST_CASE("a plan message whose item type is out of range is malformed") {
  const std::string good = dcpp::detail::encode_save_plan(save_plan(at::kFloat));
  const std::string bytes_item = [] {
    dcpp::SavePlan plan = save_plan(at::kFloat);
    plan.items[0].type = dcpp::WriteItemType::kBytes;
    return dcpp::detail::encode_save_plan(plan);
  }();
  const std::size_t type_field = field_where_they_differ(good, bytes_item);
  REQUIRE(dcpp::detail::decode_save_plan(with_field(good, type_field, 2)).items[0].type ==
          dcpp::WriteItemType::kBytes);
  for (uint64_t bad : {3ull, 4ull, 1ull << 40}) {
    REQUIRE_THROWS_WITH(
        dcpp::detail::decode_save_plan(with_field(good, type_field, bad)),
        Catch::Contains("malformed") && Catch::Contains("at byte " + std::to_string(type_field)));
  }

  dcpp::ReadItem read;
  read.type = dcpp::LoadItemType::kTensor;
  dcpp::LoadPlan load;
  load.items.push_back(read);
  const std::string load_bytes = dcpp::detail::encode_load_plan(load);
  // The item count, then the item type: the first field of the first item.
  REQUIRE_THROWS_AS(dcpp::detail::decode_load_plan(with_field(load_bytes, 8, 2)),
                    dcpp::CheckpointError);
}

TEST_CASE("a plan message whose dtype is out of range is malformed") {
  const std::string good = dcpp::detail::encode_save_plan(save_plan(at::kFloat));
  const std::size_t dtype_field =
      field_where_they_differ(good, dcpp::detail::encode_save_plan(save_plan(at::kDouble)));
  const auto options = static_cast<uint64_t>(at::ScalarType::NumOptions);
  REQUIRE(dcpp::detail::decode_save_plan(with_field(good, dtype_field, options - 1))
              .items[0]
              .tensor_data->properties.dtype == static_cast<at::ScalarType>(options - 1));
  REQUIRE_THROWS_WITH(dcpp::detail::decode_save_plan(with_field(good, dtype_field, options)),
                      Catch::Contains("malformed"));
  // Before: NumOptions + 6 decoded as kFloat (6), a silent wrong dtype.
  REQUIRE_THROWS_AS(dcpp::detail::decode_save_plan(with_field(good, dtype_field, options + 6)),
                    dcpp::CheckpointError);
}
