// Megatron-Core wrote these checkpoints with its own dist_checkpointing.save on 2 ranks
// (tests/fixtures/megatron-core, made by ../shared/tools/megatron-ref/make_megatron_fixtures.py):
// `mcore_tp2` as current Megatron writes, `mcore_legacy_common_pt` with the older common.pt. Every
// tensor must load, resharded onto this one process, as its manifest says.

#include "dcpp_test.h"

#include <dcpp/checkpoint/checkpointer.h>
#include <dcpp/core/checkpoint_error.h>
#include <dcpp/storage/checkpoint_layout.h>

#include <nlohmann/json.hpp>

#include <fstream>

using nlohmann::json;

namespace {

namespace fs = std::filesystem;

json megatron_manifest(const std::string& name) {
  std::ifstream in(dcpp::test::megatron_fixture(name + ".manifest.json"));
  REQUIRE(in.good());
  return json::parse(in);
}

at::ScalarType dtype_named(const std::string& name) {
  if (name == "float32") return at::kFloat;
  if (name == "bfloat16") return at::kBFloat16;
  if (name == "float16") return at::kHalf;
  if (name == "int64") return at::kLong;
  FAIL("the manifest names dtype " << name);
  return at::kFloat;
}

// A copy of fixture `name` in directory `dir` whose metadata.json holds `config`.
fs::path with_config(const fs::path& dir, const std::string& name, const std::string& config) {
  fs::create_directories(dir);
  const fs::path copy = dir / name;
  fs::copy(dcpp::test::megatron_fixture(name), copy, fs::copy_options::recursive);
  fs::permissions(copy / "metadata.json", fs::perms::owner_write, fs::perm_options::add);
  std::ofstream(copy / "metadata.json", std::ios::trunc) << config;
  return copy;
}

}  // namespace

TEST_CASE("every tensor of Megatron-Core's torch_dist checkpoints loads as its manifest says") {
  for (const std::string name : {"mcore_tp2", "mcore_legacy_common_pt"}) {
    INFO(name);
    const fs::path checkpoint = dcpp::test::megatron_fixture(name);
    const json manifest = megatron_manifest(name);
    CHECK(dcpp::checkpoint_layout(checkpoint)->name() == dcpp::kMegatronLayout);

    // The metadata: Megatron's all_local_plans read as data, DCP's chunks as Megatron wrote them.
    const dcpp::Metadata metadata = dcpp::read_metadata(checkpoint);
    for (const auto& [key, expected] : manifest["dcp_metadata"]["state_dict_metadata"].items()) {
      INFO(key);
      const auto found = std::find_if(
          metadata.state_dict_metadata.begin(), metadata.state_dict_metadata.end(),
          [&, &key = key](const auto& entry) { return entry.first == key; });
      REQUIRE(found != metadata.state_dict_metadata.end());
      if (expected["type"] != "TensorStorageMetadata") continue;
      const auto& tensor = std::get<dcpp::TensorStorageMetadata>(found->second);
      CHECK(tensor.size == expected["size"].get<std::vector<int64_t>>());
      REQUIRE(tensor.chunks.size() == expected["chunks"].size());
      for (std::size_t i = 0; i < tensor.chunks.size(); ++i) {
        CHECK(tensor.chunks[i].offsets == expected["chunks"][i]["offsets"].get<std::vector<int64_t>>());
        CHECK(tensor.chunks[i].sizes == expected["chunks"][i]["sizes"].get<std::vector<int64_t>>());
      }
    }

    // Every tensor, whole, on one process: each of the 2 saving ranks' chunks lands in place.
    dcpp::StateDict state;
    for (const auto& [key, expected] : manifest["sharded_tensors"].items()) {
      state.insert(key, at::full(expected["global_shape"].get<std::vector<int64_t>>(), 7,
                                 at::TensorOptions().dtype(dtype_named(expected["dtype"]))));
    }
    const dcpp::IncompatibleKeys keys = dcpp::load(state, checkpoint);
    CHECK(keys.missing_keys.empty());
    for (const auto& [key, expected] : manifest["sharded_tensors"].items()) {
      INFO(key);
      const at::Tensor values = state.at(key).tensor().to(at::kDouble);
      CHECK(values.sum().item<double>() ==
            Approx(expected["sum"].get<double>()).epsilon(1e-9).margin(1e-9));
      CHECK((values * values).sum().item<double>() ==
            Approx(expected["sum_sq"].get<double>()).epsilon(1e-9).margin(1e-9));
      const auto first = expected["first_values"].get<std::vector<double>>();
      const at::Tensor flat = values.reshape({-1});
      for (std::size_t i = 0; i < first.size(); ++i) {
        CHECK(flat[static_cast<int64_t>(i)].item<double>() == first[i]);  // exact: same bits
      }
    }
  }
}

TEST_CASE("a Megatron-Core checkpoint of another backend, or a malformed metadata.json, is refused") {
  dcpp::test::TempDir dir;
  const auto refused = [](const fs::path& checkpoint, dcpp::ErrorKind kind,
                          const std::string& message) {
    INFO(message);
    dcpp::StateDict state;
    state.insert("decoder.final_layernorm.weight", at::zeros({8}));
    try {
      dcpp::load(state, checkpoint);
      FAIL("loaded");
    } catch (const dcpp::CheckpointError& e) {
      CHECK(e.kind() == kind);
      CHECK_THAT(e.what(), Catch::Contains(message));
    }
    CHECK(state.at("decoder.final_layernorm.weight").tensor().eq(0).all().item<bool>());
  };
  refused(with_config(dir / "zarr", "mcore_tp2", R"({"sharded_backend": "zarr"})"),
          dcpp::ErrorKind::kIncompatible, "sharded backend is 'zarr'");
  refused(with_config(dir / "v2", "mcore_tp2",
                      R"({"sharded_backend": "torch_dist", "sharded_backend_version": 2})"),
          dcpp::ErrorKind::kIncompatible, "sharded_backend_version 2");
  refused(with_config(dir / "garbage", "mcore_tp2", "{\"sharded_backend\": "),
          dcpp::ErrorKind::kCorrupt, "metadata.json: not a JSON object");
}
