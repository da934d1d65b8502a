// The Hugging Face storage reader and writer on one process: PyTorch 2.14's consolidated fixture,
// round trips through the writer (one file, several files by size, by an FQN -> file mapping),
// loads without a target, the refusals, and what a save that did not finish leaves behind.

#include "dcpp_test.h"

#include "format/safetensors_header.h"

#include <dcpp/checkpoint/checkpointer.h>
#include <dcpp/core/checkpoint_error.h>
#include <dcpp/storage/huggingface_storage.h>

#include <nlohmann/json.hpp>

#include <fstream>

using dcpp::CheckpointError;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// A tensor straight from a safetensors file's bytes (the test's own reading, not dcpp's).
at::Tensor raw_tensor(const fs::path& file, const std::string& key) {
  const std::string bytes = dcpp::test::read_file(file);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes[i]);
  const json header = json::parse(bytes.substr(8, n));
  const json& info = header.at(key);
  const auto dtype = *dcpp::detail::dtype_from_safetensors_name(info["dtype"].get<std::string>());
  const auto shape = info["shape"].get<std::vector<int64_t>>();
  at::Tensor tensor = at::empty(shape, at::TensorOptions().dtype(dtype));
  const uint64_t begin = info["data_offsets"][0];
  std::memcpy(tensor.data_ptr(), bytes.data() + 8 + n + begin, tensor.nbytes());
  return tensor;
}

dcpp::StateDict sample_state() {
  dcpp::StateDict state;
  state.insert("model.embed.weight", at::arange(10 * 6, at::kFloat).reshape({10, 6}).div(3));
  state.insert("model.layers.0.w", at::arange(16, at::kBFloat16).reshape({4, 4}));
  state.insert("model.layers.0.b", at::arange(5, at::kDouble).sin());
  state.insert("model.step", at::tensor(int64_t{42}));
  state.insert("mask", at::arange(7, at::kLong).remainder(2).to(at::kBool));
  state.insert("codes", at::arange(9, at::kShort).reshape({3, 3}));
  state.insert("empty", at::empty({0, 3}, at::kFloat));
  return state;
}

dcpp::StateDict zeros_like(const dcpp::StateDict& state) {
  dcpp::StateDict zeros;
  for (const auto& item : state) zeros.insert(item.key, at::zeros_like(item.value.tensor()));
  return zeros;
}

void require_equal(const dcpp::StateDict& a, const dcpp::StateDict& b) {
  REQUIRE(a.size() == b.size());
  for (const auto& item : a) {
    INFO(item.key);
    REQUIRE(dcpp::test::bitwise_equal(item.value.tensor(), b.at(item.key).tensor()));
  }
}

dcpp::HuggingFaceWriterOptions scratch() {
  return dcpp::HuggingFaceWriterOptions().with_sync_files(false);
}

json read_json(const fs::path& path) { return json::parse(dcpp::test::read_file(path)); }

}  // namespace

TEST_CASE("PyTorch 2.14's consolidated Hugging Face fixture loads into preallocated tensors") {
  const fs::path dir = dcpp::test::fixture("hf_consolidated", "2.14");
  REQUIRE(dcpp::is_huggingface_directory(dir));
  const fs::path file = dir / "model-00001-of-00001.safetensors";
  dcpp::StateDict state;
  state.insert("model", dcpp::StateDict());
  state.at("model").dict().insert("embed", dcpp::StateDict());
  state.at("model").dict().at("embed").dict().insert("weight", at::zeros({10, 6}));
  state.insert("model.layers.0.w", at::zeros({4, 4}, at::kBFloat16));
  state.insert("lm_head.weight", at::zeros({10, 6}));
  dcpp::load(state, dir);  // the path overload finds the Hugging Face directory
  CHECK(dcpp::test::bitwise_equal(state.at("model").dict().at("embed").dict().at("weight").tensor(),
                                  raw_tensor(file, "model.embed.weight")));
  CHECK(dcpp::test::bitwise_equal(state.at("model.layers.0.w").tensor(),
                                  raw_tensor(file, "model.layers.0.w")));
  CHECK(dcpp::test::bitwise_equal(state.at("lm_head.weight").tensor(),
                                  raw_tensor(file, "lm_head.weight")));
  // The manifest's sums, as Python computed them.
  const json manifest = read_json(dcpp::test::fixture("hf_consolidated.manifest.json", "2.14"));
  CHECK(state.at("lm_head.weight").tensor().to(at::kDouble).sum().item<double>() ==
        Approx(manifest["state_dict"]["items"]["lm_head.weight"]["sum"].get<double>()));
}

TEST_CASE("a Hugging Face directory loads without a target, keys flat, and its metadata reads") {
  const fs::path dir = dcpp::test::fixture("hf_consolidated", "2.14");
  const dcpp::StateDict loaded = dcpp::load_from_keys(dir);
  REQUIRE(loaded.size() == 3);
  CHECK(dcpp::test::bitwise_equal(
      loaded.at("model.layers.0.w").tensor(),
      raw_tensor(dir / "model-00001-of-00001.safetensors", "model.layers.0.w")));
  const dcpp::Metadata metadata = dcpp::read_metadata(dir);
  REQUIRE(metadata.state_dict_metadata.size() == 3);
  // Keys select flat FQNs: without planner_data, "lm_head.weight" is one path element.
  const dcpp::StateDict some = dcpp::load_from_keys(dir, {"lm_head.weight"});
  CHECK(some.size() == 1);
}

TEST_CASE("the Hugging Face writer round-trips every dtype bit for bit in one file") {
  dcpp::test::TempDir tmp;
  const fs::path dir = tmp / "hf";
  const dcpp::StateDict state = sample_state();
  auto writer = dcpp::make_huggingface_writer(dir, scratch());
  dcpp::save(state, *writer);
  REQUIRE(fs::exists(dir / "model-00001-of-00001.safetensors"));
  const json index = read_json(dir / dcpp::kHuggingFaceIndexFile);
  CHECK(index["weight_map"].size() == state.size());
  CHECK(index["weight_map"]["mask"] == "model-00001-of-00001.safetensors");
  CHECK(index["metadata"]["total_size"] == 60 * 4 + 16 * 2 + 5 * 8 + 8 + 7 + 9 * 2);
  // No staging file is left behind.
  for (const auto& entry : fs::directory_iterator(dir)) {
    CHECK(entry.path().filename().string().front() != '.');
  }
  dcpp::StateDict loaded = zeros_like(state);
  dcpp::load(loaded, dir);
  require_equal(loaded, state);
  // What safetensors itself reads: the bytes at each header's data offsets.
  for (const auto& item : state) {
    if (item.value.tensor().numel() == 0) continue;
    INFO(item.key);
    CHECK(dcpp::test::bitwise_equal(raw_tensor(dir / "model-00001-of-00001.safetensors", item.key),
                                    item.value.tensor()));
  }
}

TEST_CASE("the Hugging Face writer splits files by size and by an FQN -> file mapping") {
  const dcpp::StateDict state = sample_state();
  SECTION("at most 64 bytes of data per file") {
    dcpp::test::TempDir tmp;
    auto writer = dcpp::make_huggingface_writer(tmp / "hf", scratch().with_max_file_size(64));
    dcpp::save(state, *writer);
    const json index = read_json(tmp / "hf" / dcpp::kHuggingFaceIndexFile);
    // In save order: embed (240 B) alone; w (32), then b (40) would pass 64; b, step (8) and
    // mask (7); codes (18) would pass 64: codes and empty.
    CHECK(index["weight_map"]["model.embed.weight"] == "model-00001-of-00004.safetensors");
    CHECK(index["weight_map"]["model.layers.0.w"] == "model-00002-of-00004.safetensors");
    CHECK(index["weight_map"]["model.layers.0.b"] == "model-00003-of-00004.safetensors");
    CHECK(index["weight_map"]["model.step"] == "model-00003-of-00004.safetensors");
    CHECK(index["weight_map"]["mask"] == "model-00003-of-00004.safetensors");
    CHECK(index["weight_map"]["codes"] == "model-00004-of-00004.safetensors");
    CHECK(index["weight_map"]["empty"] == "model-00004-of-00004.safetensors");
    dcpp::StateDict loaded = zeros_like(state);
    dcpp::load(loaded, tmp / "hf");
    require_equal(loaded, state);
  }
  SECTION("a mapping, with a file no tensor maps to") {
    dcpp::test::TempDir tmp;
    std::map<std::string, int> mapping;
    for (const auto& item : state) mapping[item.key] = item.key.rfind("model", 0) == 0 ? 1 : 3;
    auto writer =
        dcpp::make_huggingface_writer(tmp / "hf", scratch().with_fqn_to_index_mapping(mapping));
    dcpp::save(state, *writer);
    CHECK(fs::exists(tmp / "hf" / "model-00002-of-00003.safetensors"));  // empty, but there
    const json index = read_json(tmp / "hf" / dcpp::kHuggingFaceIndexFile);
    CHECK(index["weight_map"]["mask"] == "model-00003-of-00003.safetensors");
    CHECK(index["weight_map"]["model.step"] == "model-00001-of-00003.safetensors");
    dcpp::StateDict loaded = zeros_like(state);
    dcpp::load(loaded, tmp / "hf");
    require_equal(loaded, state);
  }
  SECTION("a mapping that leaves a tensor out is refused, naming it") {
    dcpp::test::TempDir tmp;
    auto writer = dcpp::make_huggingface_writer(
        tmp / "hf", scratch().with_fqn_to_index_mapping({{"model.embed.weight", 1}}));
    REQUIRE_THROWS_WITH(dcpp::save(state, *writer), Catch::Contains("fqn_to_index_mapping") &&
                                                        Catch::Contains("model.layers.0.w"));
    CHECK_FALSE(fs::exists(tmp / "hf" / dcpp::kHuggingFaceIndexFile));
  }
}

TEST_CASE("the Hugging Face writer refuses non-tensor values and existing checkpoints") {
  dcpp::test::TempDir tmp;
  dcpp::StateDict state = sample_state();
  state.insert("step", 7);
  auto writer = dcpp::make_huggingface_writer(tmp / "hf", scratch());
  REQUIRE_THROWS_WITH(dcpp::save(state, *writer),
                      Catch::Contains("'step'") && Catch::Contains("not a tensor"));
  CHECK_FALSE(dcpp::is_huggingface_directory(tmp / "hf"));  // nothing committed, nothing staged

  state.erase("step");
  dcpp::save(state, *writer);
  REQUIRE_THROWS_WITH(dcpp::save(state, *dcpp::make_huggingface_writer(tmp / "hf", scratch())),
                      Catch::Contains("already holds a checkpoint"));
}

TEST_CASE("a Hugging Face save that stops before its index leaves nothing that loads as complete") {
  dcpp::test::TempDir tmp;
  const dcpp::StateDict state = sample_state();
  auto writer = dcpp::make_huggingface_writer(tmp / "full", scratch().with_max_file_size(64));
  dcpp::save(state, *writer);
  // Staged only (the ranks wrote, finish never ran): hidden files, no checkpoint.
  fs::create_directories(tmp / "staged");
  fs::copy_file(tmp / "full" / "model-00001-of-00004.safetensors",
                tmp / "staged" / ".model-00001-of-00004.safetensors.0123.partial");
  CHECK_FALSE(dcpp::is_huggingface_directory(tmp / "staged"));
  // Some files renamed, the index not yet written: refused as incomplete.
  fs::create_directories(tmp / "renamed");
  for (const char* name :
       {"model-00001-of-00004.safetensors", "model-00002-of-00004.safetensors"}) {
    fs::copy_file(tmp / "full" / name, tmp / "renamed" / name);
  }
  dcpp::StateDict loaded = zeros_like(state);
  REQUIRE_THROWS_WITH(
      dcpp::load(loaded, tmp / "renamed"),
      Catch::Contains("model-00003-of-00004.safetensors") && Catch::Contains("incomplete"));
}

TEST_CASE("Hugging Face files with DCP's sharding info load as chunks of one tensor") {
  // What DCP's HuggingFaceStorageWriter(save_distributed=True) writes without consolidation:
  // each rank's file holds its chunk, with saved_offsets in DCP_SHARDING_INFO.
  dcpp::test::TempDir tmp;
  const at::Tensor full = at::arange(6 * 5, at::kFloat).reshape({6, 5});
  for (int rank = 0; rank < 2; ++rank) {
    const at::Tensor part = full.narrow(1, rank * 3, rank == 0 ? 3 : 2).contiguous();
    dcpp::detail::SafetensorsTensor entry{"w", at::kFloat, part.sizes().vec(), 0,
                                          static_cast<uint64_t>(part.nbytes())};
    const std::string info = "{\"w\": {\"saved_offsets\": [0, " + std::to_string(rank * 3) + "]}}";
    std::string bytes = dcpp::detail::encode_safetensors_header(
        {entry}, {{"DCP_SHARDING_INFO", info}, {"DCP_VERSION", "1.0"}, {"format", "pt"}});
    bytes.append(static_cast<const char*>(part.data_ptr()), part.nbytes());
    dcpp::test::write_file(
        tmp / ("shard-0000" + std::to_string(rank + 1) + "-model-00001-of-00001.safetensors"),
        bytes);
  }
  const dcpp::StateDict loaded = dcpp::load_from_keys(tmp.path());
  CHECK(dcpp::test::bitwise_equal(loaded.at("w").tensor(), full));
  dcpp::StateDict target;
  target.insert("w", at::zeros({6, 5}));
  dcpp::load(target, tmp.path());
  CHECK(dcpp::test::bitwise_equal(target.at("w").tensor(), full));
}
