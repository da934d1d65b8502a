// PyTorch 2.14's item formats (tests/fixtures/pytorch-2.14): zstd_single was written with
// `FileSystemWriter(_extensions=[ZStandard()])`, safetensors_format with
// `serialization_format=SerializationFormat.SAFETENSORS`. Every value must read back as the
// manifest beside the fixture says: without a target, into preallocated tensors, and into row
// shards as two ranks of a resharded load would hold them. Then hostile safetensors headers.

#include "dcpp_test.h"

#include "format/metadata_pickle.h"
#include "format/safetensors_header.h"

#include <dcpp/checkpoint/checkpointer.h>
#include <dcpp/core/checkpoint_error.h>

#include <nlohmann/json.hpp>

#include <cstring>
#include <fstream>
#include <functional>
#include <map>

using dcpp::StateDict;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

const char* const kFixtures[] = {"zstd_single", "safetensors_format"};

json manifest_214(const std::string& name) {
  std::ifstream in(dcpp::test::fixture(name + ".manifest.json", "2.14"));
  REQUIRE(in.good());
  return json::parse(in)["state_dict"];
}

at::ScalarType dtype_of(const std::string& name) {
  static const std::map<std::string, at::ScalarType> dtypes = {
      {"float32", at::kFloat},     {"float64", at::kDouble}, {"float16", at::kHalf},
      {"bfloat16", at::kBFloat16}, {"int64", at::kLong},     {"int32", at::kInt},
      {"int16", at::kShort},       {"int8", at::kChar},      {"uint8", at::kByte},
      {"bool", at::kBool}};
  return dtypes.at(name);
}

void check_tensor_214(const std::string& where, const at::Tensor& tensor, const json& expected) {
  INFO(where);
  REQUIRE(tensor.scalar_type() == dtype_of(expected["dtype"]));
  REQUIRE(tensor.sizes().vec() == expected["shape"].get<std::vector<int64_t>>());
  const at::Tensor as_double = tensor.to(at::kDouble);
  REQUIRE(as_double.sum().item<double>() ==
          Approx(expected["sum"].get<double>()).epsilon(1e-12).margin(1e-12));
  REQUIRE(as_double.abs().sum().item<double>() ==
          Approx(expected["abs_sum"].get<double>()).epsilon(1e-12).margin(1e-12));
}

// Leaves by flat key ("meta.step" for a nested value), with their real nesting.
struct Leaf {
  std::vector<std::string> path;
  json expected;
};

void flatten(const json& node, const std::vector<std::string>& prefix,
             std::map<std::string, Leaf>& out) {
  for (const auto& [key, item] : node["items"].items()) {
    std::vector<std::string> path = prefix;
    path.push_back(key);
    if (item["type"] == "dict") {
      flatten(item, path, out);
      continue;
    }
    std::string flat;
    for (const std::string& part : path) flat += (flat.empty() ? "" : ".") + part;
    out[flat] = Leaf{path, item};
  }
}

std::map<std::string, json> flat_manifest(const std::string& name) {
  std::map<std::string, Leaf> leaves;
  flatten(manifest_214(name), {}, leaves);
  std::map<std::string, json> out;
  for (auto& [key, leaf] : leaves) out[key] = leaf.expected;
  return out;
}

void check_loaded(const std::string& name, const StateDict& loaded) {
  const json expected = manifest_214(name);
  REQUIRE(loaded.size() == expected["items"].size());
  std::map<std::string, Leaf> leaves;
  flatten(expected, {}, leaves);
  for (const auto& [key, leaf] : leaves) {
    const dcpp::StateValue* value = &loaded.at(leaf.path.front());
    for (std::size_t i = 1; i < leaf.path.size(); ++i) {
      value = &value->dict().at(leaf.path[i]);
    }
    const json& item = leaf.expected;
    if (item["type"] == "tensor") {
      check_tensor_214(key, value->tensor(), item);
    } else if (item["type"] == "int") {
      REQUIRE(value->value().toInt() == item["value"].get<int64_t>());
    } else if (item["type"] == "str") {
      REQUIRE(value->value().toStringRef() == item["value"].get<std::string>());
    }
  }
}

// Zeroed tensors of the manifest's dtypes and shapes, under their flat keys.
StateDict preallocated(const std::string& name) {
  StateDict target;
  for (const auto& [key, item] : flat_manifest(name)) {
    if (item["type"] == "tensor") {
      target.insert(key, at::zeros(item["shape"].get<std::vector<int64_t>>(),
                                   at::TensorOptions().dtype(dtype_of(item["dtype"]))));
    }
  }
  return target;
}

}  // namespace

TEST_CASE("PyTorch 2.14's zstd and safetensors-format fixtures load without a target") {
  for (const std::string name : kFixtures) {
    SECTION(name) { check_loaded(name, dcpp::load_from_keys(dcpp::test::fixture(name, "2.14"))); }
  }
}

TEST_CASE("PyTorch 2.14's zstd and safetensors-format fixtures load into preallocated tensors") {
  for (const std::string name : kFixtures) {
    SECTION(name) {
      StateDict target = preallocated(name);
      dcpp::load(target, dcpp::test::fixture(name, "2.14"));
      for (const auto& [key, item] : flat_manifest(name)) {
        if (item["type"] == "tensor") check_tensor_214(key, target.at(key).tensor(), item);
      }
      // The same bits as a load without a target.
      const StateDict loaded = dcpp::load_from_keys(dcpp::test::fixture(name, "2.14"));
      if (name == "safetensors_format") {
        REQUIRE(
            dcpp::test::bitwise_equal(target.at("enc.w").tensor(), loaded.at("enc.w").tensor()));
      }
    }
  }
}

TEST_CASE("PyTorch 2.14's zstd and safetensors-format fixtures load into row shards of 2 ranks") {
  for (const std::string name : kFixtures) {
    SECTION(name) {
      const StateDict full = dcpp::load_from_keys(dcpp::test::fixture(name, "2.14"));
      for (const auto& [key, item] : flat_manifest(name)) {
        const auto shape = item.value("shape", std::vector<int64_t>{});
        if (item["type"] != "tensor" || shape.empty() || shape[0] < 2) continue;
        INFO(key);
        const at::ScalarType dtype = dtype_of(item["dtype"]);
        std::vector<at::Tensor> rows;
        // What ranks 0 and 1 of a 2-rank load hold: each reads part of the saved chunk.
        for (int64_t rank = 0; rank < 2; ++rank) {
          const at::Tensor zeros = at::zeros(shape, at::TensorOptions().dtype(dtype));
          const dcpp::ShardedTensor shard = dcpp::ShardedTensor::from_chunk_of(zeros, 0, rank, 2);
          StateDict target;
          target.insert(key, shard);
          dcpp::load(target, dcpp::test::fixture(name, "2.14"));
          rows.push_back(shard.local_shards().front().tensor);
        }
        const at::Tensor joined = at::cat(rows, 0);
        check_tensor_214(key, joined, item);
        REQUIRE(dcpp::test::bitwise_equal(joined, full.at(key).tensor()));
      }
    }
  }
}

namespace {

// The fixture safetensors_format copied to `dir` with its blob's header JSON changed by `edit`
// (the blob starts the file: the fixture has no bytes items).
void copy_with_header(const fs::path& dir, const std::function<void(json&)>& edit) {
  fs::copy(dcpp::test::fixture("safetensors_format", "2.14"), dir, fs::copy_options::recursive);
  const std::string data = dcpp::test::read_file(dir / "__0_0.distcp");
  uint64_t length = 0;
  for (int i = 7; i >= 0; --i) length = (length << 8) | static_cast<unsigned char>(data[i]);
  json header = json::parse(data.substr(8, length));
  edit(header);
  std::string text = header.dump();
  std::string head(8, '\0');
  for (int i = 0; i < 8; ++i) head[i] = static_cast<char>((text.size() >> (8 * i)) & 0xff);
  dcpp::test::write_file(dir / "__0_0.distcp", head + text + data.substr(8 + length));
}

// `key` empty: a problem of the whole blob, named with whichever of its tensors is read first.
void require_refused(const fs::path& dir, const std::string& key, const std::string& why) {
  INFO(why);
  REQUIRE_THROWS_WITH(dcpp::load_from_keys(dir),
                      Catch::Contains("__0_0.distcp") &&
                          Catch::Contains(key.empty() ? ", key '" : "key '" + key + "'") &&
                          Catch::Contains(why));
}

}  // namespace

TEST_CASE("malformed safetensors headers in DCP items are CheckpointErrors naming file and key") {
  dcpp::test::TempDir dir;
  int n = 0;
  const auto edited = [&](const std::function<void(json&)>& edit) {
    const fs::path where = dir / std::to_string(n++);
    copy_with_header(where, edit);
    return where;
  };
  require_refused(edited([](json& h) { h["enc.w"]["dtype"] = "F99"; }), "enc.w",
                  "dtype \"F99\" is not one dcpp reads");
  require_refused(edited([](json& h) {
                    h["enc.w"]["shape"] = {7, -2};
                  }),
                  "enc.w", "not a non-negative integer");
  require_refused(edited([](json& h) {
                    h["enc.w"]["data_offsets"] = {8, 64000};
                  }),
                  "enc.w", "data_offsets [8, 64000)");
  require_refused(edited([](json& h) {
                    h["enc.w"]["shape"] = {2, 7};
                  }),
                  "enc.w", "has shape [2, 7] but .metadata's chunk has [7, 2]");
  require_refused(edited([](json& h) { h["enc.w"]["dtype"] = "I32"; }), "enc.w",
                  "is Int but .metadata says Float");
  require_refused(edited([](json& h) {
                    h["enc.x"] = h["enc.w"];
                    h.erase("enc.w");
                  }),
                  "enc.w", "holds no tensor of this key");
  require_refused(edited([](json& h) {
                    h["__metadata__"]["DCP_SHARDING_INFO"] =
                        "{\"enc.w\": {\"saved_offsets\": [3, 0]}}";
                  }),
                  "enc.w", "saved it at offsets [3, 0]");
  require_refused(edited([](json& h) { h["__metadata__"]["DCP_SHARDING_INFO"] = "{not json"; }), "",
                  "DCP_SHARDING_INFO is not valid JSON");

  // A header length past the file (a cut file) and a header that is not JSON.
  fs::copy(dcpp::test::fixture("safetensors_format", "2.14"), dir / "cut",
           fs::copy_options::recursive);
  std::string data = dcpp::test::read_file(dir / "cut" / "__0_0.distcp");
  dcpp::test::write_file(dir / "cut" / "__0_0.distcp", data.substr(0, data.size() - 20));
  require_refused(dir / "cut", "", "data_offsets");
  data[9] = '!';
  dcpp::test::write_file(dir / "cut" / "__0_0.distcp", data);
  require_refused(dir / "cut", "", "not valid JSON");
}

TEST_CASE("the safetensors header codec rejects what the format forbids") {
  const std::string what = "blob";
  REQUIRE_THROWS_WITH(dcpp::detail::parse_safetensors_header("[1]", 0, what),
                      Catch::Contains("not a JSON object"));
  REQUIRE_THROWS_WITH(
      dcpp::detail::parse_safetensors_header(
          R"({"a":{"dtype":"F32","shape":[4611686018427387904,4],"data_offsets":[0,16]}})", 16,
          what),
      Catch::Contains("key 'a'"));
  REQUIRE_THROWS_WITH(
      dcpp::detail::parse_safetensors_header(R"({"__metadata__":{"k":1}})", 0, what),
      Catch::Contains("not a string"));
  const char huge[8] = {0, 0, 0, 0, 0, 0, 0, 1};
  REQUIRE_THROWS_WITH(
      dcpp::detail::decode_safetensors_header_length(std::string_view(huge, 8), 1 << 20, what),
      Catch::Contains("-byte limit"));
  const std::string encoded = dcpp::detail::encode_safetensors_header(
      {{"x", at::kBFloat16, {2, 3}, 0, 12}}, {{"format", "pt"}});
  REQUIRE(encoded.size() % 8 == 0);
  const uint64_t length = dcpp::detail::decode_safetensors_header_length(
      std::string_view(encoded.data(), 8), encoded.size() + 12, what);
  const auto header = dcpp::detail::parse_safetensors_header(encoded.substr(8, length), 12, what);
  REQUIRE(header.tensors.size() == 1);
  REQUIRE(header.tensors[0].name == "x");
  REQUIRE(header.tensors[0].dtype == at::kBFloat16);
  REQUIRE(header.tensors[0].shape == std::vector<int64_t>{2, 3});
  REQUIRE(*header.find_metadata("format") == "pt");
  REQUIRE(header.data_start == encoded.size());
}
