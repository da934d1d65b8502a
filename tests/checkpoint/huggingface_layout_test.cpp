// The Hugging Face writer's file layout (huggingface_layout.h), the box runs its reader and writer
// use (tensor_runs.h), and the safetensors header codec (safetensors_header.h).

#include "dcpp_test.h"

#include "format/safetensors_header.h"
#include "huggingface/huggingface_layout.h"
#include "huggingface/tensor_runs.h"

#include <dcpp/core/checkpoint_error.h>

using namespace dcpp::detail;

namespace {

std::vector<std::pair<uint64_t, uint64_t>> runs_of(const std::vector<int64_t>& shape,
                                                   const std::vector<int64_t>& offsets,
                                                   const std::vector<int64_t>& lengths) {
  std::vector<std::pair<uint64_t, uint64_t>> runs;
  const BoxRuns box = box_runs(shape, offsets, lengths, 4);
  box.for_each([&](uint64_t at, uint64_t in_box) { runs.emplace_back(at, in_box); });
  REQUIRE(runs.size() == box.count);
  return runs;
}

// Every element of the box, by reading its runs out of a row-major arange: equal to narrowing.
void check_box(const std::vector<int64_t>& shape, const std::vector<int64_t>& offsets,
               const std::vector<int64_t>& lengths) {
  int64_t numel = 1;
  for (int64_t size : shape) numel *= size;
  const at::Tensor full = at::arange(numel, at::kInt).reshape(shape);
  at::Tensor expected = full;
  for (std::size_t d = 0; d < shape.size(); ++d) {
    expected = expected.narrow(static_cast<int64_t>(d), offsets[d], lengths[d]);
  }
  at::Tensor got = at::empty(lengths, at::kInt);
  const BoxRuns box = box_runs(shape, offsets, lengths, 4);
  box.for_each([&](uint64_t at, uint64_t in_box) {
    std::memcpy(static_cast<char*>(got.data_ptr()) + in_box,
                static_cast<const char*>(full.data_ptr()) + at, box.run_bytes);
  });
  REQUIRE(dcpp::test::bitwise_equal(got, expected.contiguous()));
}

}  // namespace

TEST_CASE("box runs: whole rows are one run, a column block one run per row") {
  CHECK(runs_of({4, 6}, {1, 0}, {2, 6}) == std::vector<std::pair<uint64_t, uint64_t>>{{24, 0}});
  CHECK(runs_of({4, 6}, {1, 2}, {2, 3}) ==
        std::vector<std::pair<uint64_t, uint64_t>>{{32, 0}, {56, 12}});
  CHECK(runs_of({4, 6}, {0, 0}, {4, 6}).size() == 1);
  CHECK(runs_of({4, 6}, {0, 0}, {0, 6}).empty());
  CHECK(runs_of({}, {}, {}) == std::vector<std::pair<uint64_t, uint64_t>>{{0, 0}});
  CHECK(box_runs({4, 6}, {1, 2}, {2, 3}, 4).run_bytes == 12);
  CHECK(runs_of({2, 3, 4}, {0, 1, 0}, {2, 1, 4}) ==
        std::vector<std::pair<uint64_t, uint64_t>>{{16, 0}, {64, 16}});
}

TEST_CASE("box runs read every box of a 3-D tensor exactly") {
  const std::vector<int64_t> shape{3, 4, 5};
  for (int64_t a = 0; a < 3; ++a) {
    for (int64_t b = 0; b < 4; ++b) {
      for (int64_t c = 0; c < 5; ++c) {
        check_box(shape, {a, b, c}, {3 - a, 4 - b, 5 - c});
        check_box(shape, {0, b, 0}, {3, 1, 5});
        check_box(shape, {a, 0, c}, {1, 4, 1});
      }
    }
  }
}

TEST_CASE("the layout fills files in order under the size limit, aligned by element size") {
  const std::vector<HuggingFaceTensorSpec> specs = {
      {"a", at::kBFloat16, {3}},  // 6 bytes
      {"b", at::kDouble, {2}},    // 16
      {"c", at::kFloat, {100}},   // 400: larger than the limit, a file of its own
      {"d", at::kByte, {5}},      // 5
  };
  const HuggingFaceLayout layout = compute_huggingface_layout(specs, {}, 32);
  REQUIRE(layout.files.size() == 3);
  CHECK(layout.files[0].name == "model-00001-of-00003.safetensors");
  CHECK(layout.total_size == 6 + 16 + 400 + 5);
  // File 1: b (8-byte elements) before a.
  REQUIRE(layout.files[0].tensors == std::vector<std::size_t>{1, 0});
  const HuggingFacePlacedTensor& b = *layout.find("b");
  const HuggingFacePlacedTensor& a = *layout.find("a");
  CHECK(b.offset == layout.files[0].header.size());
  CHECK(a.offset == b.offset + 16);
  CHECK(layout.files[0].size == layout.files[0].header.size() + 22);
  CHECK(layout.files[0].header.size() % 8 == 0);
  CHECK(layout.find("c")->file == 1);
  CHECK(layout.find("d")->file == 2);
  // The header decodes to the same places, with DCP's metadata.
  const HuggingFaceFile& file = layout.files[0];
  const uint64_t n = decode_safetensors_header_length(file.header, file.size, "test");
  const SafetensorsHeader header =
      parse_safetensors_header(std::string_view(file.header).substr(8, n), 22, "test");
  REQUIRE(header.tensors.size() == 2);
  CHECK(header.tensors[0].name == "b");
  CHECK(header.tensors[1].begin == 16);
  CHECK(header.data_start + header.tensors[1].begin == a.offset);
  REQUIRE(header.find_metadata("DCP_SHARDING_INFO") != nullptr);
  CHECK(*header.find_metadata("format") == "pt");
  CHECK(*header.find_metadata("DCP_VERSION") == "1.0");
}

TEST_CASE("the layout follows an FQN -> file mapping and refuses what it cannot place") {
  const std::vector<HuggingFaceTensorSpec> specs = {{"a", at::kFloat, {2}}, {"b", at::kFloat, {3}}};
  const HuggingFaceLayout layout = compute_huggingface_layout(specs, {{"a", 3}, {"b", 1}}, 0);
  REQUIRE(layout.files.size() == 3);
  CHECK(layout.files[1].tensors.empty());
  CHECK(layout.find("a")->file == 2);
  CHECK(layout.files[2].name == "model-00003-of-00003.safetensors");
  CHECK_THROWS_WITH(compute_huggingface_layout(specs, {{"a", 1}}, 0), Catch::Contains("'b'"));
  CHECK_THROWS_WITH(compute_huggingface_layout(specs, {{"a", 0}, {"b", 1}}, 0),
                    Catch::Contains("'a'"));
  CHECK_THROWS_WITH(compute_huggingface_layout({{"z", at::kComplexFloat, {2}}}, {}, 0),
                    Catch::Contains("'z'"));
  CHECK(compute_huggingface_layout(specs, {}, 0).files.size() == 1);
}

TEST_CASE("a rank's layout survives its text form, and a malformed one is refused") {
  const HuggingFaceLayout layout =
      compute_huggingface_layout({{"a", at::kFloat, {2, 3}}, {"b", at::kHalf, {4}}}, {}, 8);
  const HuggingFaceRankLayout rank = decode_rank_layout(encode_rank_layout(layout, "t1", {"b"}));
  REQUIRE(rank.files.size() == 2);
  CHECK(rank.staging_files[1] == ".model-00002-of-00002.safetensors.t1.partial");
  REQUIRE(rank.tensors.size() == 1);
  CHECK(rank.tensors.at("b").file == 1);
  CHECK(rank.tensors.at("b").offset == layout.find("b")->offset);
  CHECK(rank.tensors.at("b").dtype == at::kHalf);
  CHECK(rank.tensors.at("b").shape == std::vector<int64_t>{4});
  CHECK_THROWS_AS(decode_rank_layout("__0_"), dcpp::CheckpointError);
  CHECK_THROWS_AS(decode_rank_layout(R"({"files":[],"staging_files":[],"tensors":{"a":{}}})"),
                  dcpp::CheckpointError);
}

TEST_CASE("safetensors headers encode and parse back") {
  const std::string bytes = encode_safetensors_header(
      {{"x", at::kBFloat16, {2, 0}, 0, 0}, {"y", at::kLong, {3}, 0, 24}}, {{"format", "pt"}});
  CHECK(bytes.size() % 8 == 0);
  const uint64_t n = decode_safetensors_header_length(bytes, bytes.size() + 24, "t");
  const SafetensorsHeader header =
      parse_safetensors_header(std::string_view(bytes).substr(8, n), 24, "t");
  REQUIRE(header.tensors.size() == 2);
  CHECK(header.tensors[0].name == "x");
  CHECK(header.tensors[0].shape == std::vector<int64_t>{2, 0});
  CHECK(header.tensors[1].dtype == at::kLong);
  CHECK(header.data_start == bytes.size());
  CHECK(*header.find_metadata("format") == "pt");
  CHECK(safetensors_dtype_name(at::kComplexDouble) == std::nullopt);
  CHECK(dtype_from_safetensors_name("BF16") == at::kBFloat16);
}
