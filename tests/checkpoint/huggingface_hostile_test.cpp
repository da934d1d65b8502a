// Hostile and damaged Hugging Face directories: every one is refused by the reader before any data
// is read, with a CheckpointError naming the file and the key.

#include "dcpp_test.h"

#include <dcpp/checkpoint/checkpointer.h>
#include <dcpp/core/checkpoint_error.h>
#include <dcpp/storage/huggingface_storage.h>

#include <string>

namespace fs = std::filesystem;

namespace {

// A safetensors file: the 8-byte length of `header`, `header`, then `data_size` zero bytes.
std::string safetensors(const std::string& header, std::size_t data_size) {
  std::string bytes(8, '\0');
  const uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return bytes + header + std::string(data_size, '\0');
}

// Reading `dir`'s metadata must fail with a message holding every one of `parts`.
void require_refused(const fs::path& dir, const std::vector<std::string>& parts) {
  try {
    dcpp::make_huggingface_reader(dir)->read_metadata();
  } catch (const dcpp::CheckpointError& error) {
    const std::string message = error.what_without_backtrace();
    INFO(message);
    for (const std::string& part : parts) CHECK(message.find(part) != std::string::npos);
    return;
  }
  FAIL("the directory was read without an error");
}

const std::string kGood = R"("w":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]})";

}  // namespace

TEST_CASE("hostile safetensors headers are refused, naming the file and key") {
  struct Case {
    const char* name;
    std::string bytes;
    std::vector<std::string> message;
  };
  const std::vector<Case> cases = {
      {"header length past the end",
       std::string("\xff\xff\xff\xff\xff\xff\xff\x7f", 8),
       {"header length"}},
      {"too short", std::string("\x01\x02", 2), {"shorter than the 8-byte"}},
      {"not JSON", safetensors("{\"w\": [", 16), {"not valid JSON"}},
      {"a JSON array", safetensors("[1, 2]", 0), {"not a JSON object"}},
      {"unknown dtype",
       safetensors(R"({"w":{"dtype":"C64","shape":[2],"data_offsets":[0,16]}})", 16),
       {"'w'", "C64"}},
      {"negative size",
       safetensors(R"({"w":{"dtype":"F32","shape":[-2,2],"data_offsets":[0,16]}})", 16),
       {"'w'", "non-negative"}},
      {"fractional size",
       safetensors(R"({"w":{"dtype":"F32","shape":[2.5,2],"data_offsets":[0,16]}})", 16),
       {"'w'", "non-negative"}},
      {"missing data_offsets",
       safetensors(R"({"w":{"dtype":"F32","shape":[2,2]}})", 16),
       {"'w'", "data_offsets"}},
      {"range not the tensor's size",
       safetensors(R"({"w":{"dtype":"F32","shape":[2,2],"data_offsets":[0,12]}})", 16),
       {"'w'", "exactly the tensor's 16 bytes"}},
      {"range past the data (truncated)", safetensors("{" + kGood + "}", 8), {"'w'", "truncated"}},
      {"overflowing shape",
       safetensors(
           R"({"w":{"dtype":"F64","shape":[4294967296,4294967296,16],"data_offsets":[0,16]}})", 16),
       {"'w'", "overflowing"}},
      {"overlapping tensors",
       safetensors("{" + kGood + R"(,"v":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})", 16),
       {"'v'", "overlap", "'w'"}},
      {"a name twice",
       safetensors("{" + kGood + R"(,"w":{"dtype":"F32","shape":[2],"data_offsets":[16,24]}})", 24),
       {"'w'", "twice"}},
      {"metadata not strings",
       safetensors(R"({"__metadata__":{"a":1},)" + kGood + "}", 16),
       {"__metadata__"}},
      {"bad sharding info",
       safetensors(
           R"({"__metadata__":{"DCP_SHARDING_INFO":"{\"w\": {\"saved_offsets\": [-1, 0]}}"},)" +
               kGood + "}",
           16),
       {"'w'", "saved_offsets"}},
      {"sharding info of the wrong rank",
       safetensors(R"({"__metadata__":{"DCP_SHARDING_INFO":"{\"w\": {\"saved_offsets\": [0]}}"},)" +
                       kGood + "}",
                   16),
       {"'w'", "1 offsets"}},
      {"sharding info without the tensor",
       safetensors(R"({"__metadata__":{"DCP_SHARDING_INFO":"{}"},)" + kGood + "}", 16),
       {"'w'", "no saved_offsets"}},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    dcpp::test::TempDir tmp;
    dcpp::test::write_file(tmp / "model.safetensors", c.bytes);
    std::vector<std::string> parts = c.message;
    parts.push_back((tmp / "model.safetensors").string());
    require_refused(tmp.path(), parts);
  }
}

TEST_CASE("a hostile or inconsistent index is refused, naming the index and key") {
  const auto with_index = [](const dcpp::test::TempDir& tmp, const std::string& index) {
    dcpp::test::write_file(tmp / "model-00001-of-00001.safetensors",
                           safetensors("{" + kGood + "}", 16));
    dcpp::test::write_file(tmp / dcpp::kHuggingFaceIndexFile, index);
  };
  const std::string outside = (fs::temp_directory_path() / "x.safetensors").string();
  struct Case {
    std::string index;
    std::vector<std::string> message;
  };
  const std::vector<Case> cases = {
      {R"({"weight_map": {"w": "../model-00001-of-00001.safetensors"}})",
       {"'w'", "not inside the checkpoint directory"}},
      {R"({"weight_map": {"w": ")" + outside + R"("}})", {"'w'", "not inside"}},
      {R"({"weight_map": {"w": "model-00002-of-00002.safetensors"}})", {"'w'", "does not exist"}},
      {R"({"weight_map": {"w": 3}})", {"'w'", "not a string"}},
      {R"({"metadata": {}})", {"weight_map"}},
      {R"({"weight_map": )", {"not valid JSON"}},
      {R"({"weight_map": {"w": "model-00001-of-00001.safetensors", "v": "model-00001-of-00001.safetensors"}})",
       {"'v'", "does not hold this tensor"}},
      {R"({"weight_map": {}})", {"no *.safetensors file"}},
  };
  for (const Case& c : cases) {
    INFO(c.index);
    dcpp::test::TempDir tmp;
    with_index(tmp, c.index);
    std::vector<std::string> parts = c.message;
    require_refused(tmp.path(), parts);
  }
  SECTION("a file holding a tensor the index does not list") {
    dcpp::test::TempDir tmp;
    dcpp::test::write_file(tmp / "a.safetensors", safetensors("{" + kGood + "}", 16));
    dcpp::test::write_file(
        tmp / "b.safetensors",
        safetensors(R"({"v":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 4));
    dcpp::test::write_file(tmp / dcpp::kHuggingFaceIndexFile,
                           R"({"weight_map": {"w": "a.safetensors", "v": "a.safetensors"}})");
    require_refused(tmp.path(), {"'v'", "a.safetensors"});
  }
}

TEST_CASE("chunks of one tensor that overlap or leave a hole are refused") {
  const auto shard = [](int column, int width) {
    const std::string info =
        R"({"__metadata__":{"DCP_SHARDING_INFO":"{\"w\": {\"saved_offsets\": [0, )" +
        std::to_string(column) + R"(]}}"},"w":{"dtype":"F32","shape":[2,)" + std::to_string(width) +
        R"(],"data_offsets":[0,)" + std::to_string(8 * width) + "]}}";
    return safetensors(info, static_cast<std::size_t>(8 * width));
  };
  SECTION("overlap") {
    dcpp::test::TempDir tmp;
    dcpp::test::write_file(tmp / "shard-1.safetensors", shard(0, 3));
    dcpp::test::write_file(tmp / "shard-2.safetensors", shard(2, 2));
    require_refused(tmp.path(), {"'w'", "overlaps", "shard-1.safetensors"});
  }
  SECTION("a hole (a shard file missing)") {
    dcpp::test::TempDir tmp;
    dcpp::test::write_file(tmp / "shard-1.safetensors", shard(0, 2));
    dcpp::test::write_file(tmp / "shard-3.safetensors", shard(4, 2));
    require_refused(tmp.path(), {"'w'", "cover only part"});
  }
  SECTION("the same chunk twice") {
    dcpp::test::TempDir tmp;
    dcpp::test::write_file(tmp / "shard-1.safetensors", shard(0, 2));
    dcpp::test::write_file(tmp / "shard-2.safetensors", shard(0, 2));
    require_refused(tmp.path(), {"'w'", "same offsets"});
  }
}

TEST_CASE("a load plan whose destination disagrees with the file is refused") {
  dcpp::test::TempDir tmp;
  dcpp::test::write_file(tmp / "model.safetensors", safetensors("{" + kGood + "}", 16));
  dcpp::StateDict wrong_dtype;
  wrong_dtype.insert("w", at::zeros({2, 2}, at::kDouble));
  REQUIRE_THROWS_WITH(dcpp::load(wrong_dtype, tmp.path()), Catch::Contains("'w'"));
  dcpp::StateDict wrong_shape;
  wrong_shape.insert("w", at::zeros({4}));
  REQUIRE_THROWS_WITH(dcpp::load(wrong_shape, tmp.path()), Catch::Contains("'w'"));
}
