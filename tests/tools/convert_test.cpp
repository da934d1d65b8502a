#include "dcpp_test.h"
#include "tools_test_util.h"

#include "common/progress_bar.h"
#include "convert/checkpoint_source.h"
#include "convert/convert_command.h"
#include "diff/diff_command.h"
#include "verify/verify_command.h"

#include <dcpp/checkpoint/checkpointer.h>
#include <dcpp/core/checkpoint_error.h>

#include <torch/csrc/jit/serialization/pickle.h>
#include <nlohmann/json.hpp>

#include <cstdio>

using dcpp::test::run_cli;
using dcpp::tools::ConvertOptions;
using dcpp::tools::TargetFormat;
using nlohmann::json;

namespace {

ConvertOptions to(TargetFormat format) {
  ConvertOptions options;
  options.to = format;
  options.progress = false;
  return options;
}

// Every tensor of `a` is in `b` with the same dtype, shape and bytes.
void require_tensors_equal(const std::filesystem::path& a, const std::filesystem::path& b) {
  auto sa = dcpp::tools::open_checkpoint_source(a);
  auto sb = dcpp::tools::open_checkpoint_source(b);
  std::size_t tensors = 0;
  for (const auto& entry : sa->entries()) {
    if (!entry.is_tensor) continue;
    const auto* other = dcpp::tools::find_entry(*sb, entry.key);
    INFO(entry.key);
    REQUIRE(other != nullptr);
    REQUIRE(dcpp::test::bitwise_equal(sa->read_tensor(entry), sb->read_tensor(*other)));
    ++tensors;
  }
  REQUIRE(tensors > 0);
}

// The entry at `path` of a torch::pickle_load'ed nested dict.
c10::IValue at_path(const c10::IValue& root, const std::vector<std::string>& path) {
  c10::IValue node = root;
  for (const std::string& step : path) node = node.toGenericDict().at(step);
  return node;
}

}  // namespace

TEST_CASE("convert to torch-save and back to DCP is equal bit for bit") {
  dcpp::test::TempDir dir;
  for (const char* name : {"single_rank_mixed", "model_optim_adam", "two_rank_sharded"}) {
    INFO(name);
    const auto src = dcpp::test::fixture(name);
    const auto pt = dir / (std::string(name) + ".pt");
    const auto summary = dcpp::tools::convert_checkpoint(src, pt, to(TargetFormat::kTorchSave));
    REQUIRE(summary.files == std::vector<std::filesystem::path>{pt});
    const auto back = dir / (std::string(name) + "_back");
    dcpp::tools::convert_checkpoint(pt, back, to(TargetFormat::kDcp));
    const json from_pt = dcpp::tools::diff_checkpoints(src, pt);
    INFO(from_pt.dump());
    REQUIRE(from_pt["equal"] == true);
    const json round_trip = dcpp::tools::diff_checkpoints(src, back);
    INFO(round_trip.dump());
    REQUIRE(round_trip["equal"] == true);
    REQUIRE(dcpp::tools::verify_checkpoint(back)["ok"] == true);
    // The nesting survives: planner_data paths are the same.
    const auto original = dcpp::read_metadata(src);
    const auto converted = dcpp::read_metadata(back);
    std::map<std::string, dcpp::ObjectPath> a(original.planner_data.begin(),
                                              original.planner_data.end());
    std::map<std::string, dcpp::ObjectPath> b(converted.planner_data.begin(),
                                              converted.planner_data.end());
    const bool same_paths = a == b;  // (Catch cannot print the maps)
    REQUIRE(same_paths);
  }
}

TEST_CASE("libtorch's own pickle_load reads the torch-save output, sharded tensors assembled") {
  dcpp::test::TempDir dir;
  const auto src = dcpp::test::fixture("two_rank_sharded");
  dcpp::tools::convert_checkpoint(src, dir / "out.pt", to(TargetFormat::kTorchSave));
  const std::string bytes = dcpp::test::read_file(dir / "out.pt");
  const c10::IValue loaded = torch::jit::pickle_load(std::vector<char>(bytes.begin(), bytes.end()));
  const dcpp::StateDict expected = dcpp::load_from_keys(src);
  std::size_t tensors = 0;
  for (const auto& item : expected) {
    if (!item.value.is_tensor()) continue;
    INFO(item.key);
    REQUIRE(dcpp::test::bitwise_equal(at_path(loaded, {item.key}).toTensor(), item.value.tensor()));
    ++tensors;
  }
  REQUIRE(tensors >= 3);
}

TEST_CASE("Python's torch.save file converts to DCP, keeping nesting and values") {
  dcpp::test::TempDir dir;
  const auto pt = dcpp::test::fixture("torch_save_state_dict.pt");
  const auto cli = run_cli("convert " + pt.string() + " " + (dir / "ckpt").string() + " --to dcp");
  INFO(cli.output);
  REQUIRE(cli.exit_code == 0);
  REQUIRE_THAT(cli.output, Catch::Contains("converted "));
  REQUIRE(cli.output.find('\r') == std::string::npos);  // no progress bar off a terminal
  REQUIRE(dcpp::tools::diff_checkpoints(pt, dir / "ckpt")["equal"] == true);
  REQUIRE(dcpp::tools::verify_checkpoint(dir / "ckpt")["ok"] == true);
  const dcpp::StateDict loaded = dcpp::load_from_keys(dir / "ckpt");
  REQUIRE(loaded.at("model").dict().at("linear.weight").tensor().sizes().vec() ==
          std::vector<int64_t>{8, 4});
  // Back to torch-save, and equal again.
  REQUIRE(run_cli("convert " + (dir / "ckpt").string() + " " + (dir / "again.pt").string() +
                  " --to torch-save")
              .exit_code == 0);
  REQUIRE(run_cli("diff " + pt.string() + " " + (dir / "again.pt").string()).exit_code == 0);
}

TEST_CASE("safetensors output holds every tensor bit for bit, sharded under a size limit") {
  dcpp::test::TempDir dir;
  const auto src = dcpp::test::fixture("single_rank_mixed");
  dcpp::tools::convert_checkpoint(src, dir / "model.safetensors", to(TargetFormat::kSafetensors));
  require_tensors_equal(src, dir / "model.safetensors");

  // The header: 8-byte length, JSON with dtype/shape/data_offsets and __metadata__ strings.
  const std::string bytes = dcpp::test::read_file(dir / "model.safetensors");
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  REQUIRE(n % 8 == 0);
  const json header = json::parse(bytes.substr(8, n));
  REQUIRE(header["__metadata__"]["format"] == "pt");
  REQUIRE(header["__metadata__"]["step"] == "7");
  REQUIRE(header["model.linear.weight"]["dtype"] == "F32");
  REQUIRE(header["model.linear.weight"]["shape"] == json::array({8, 4}));
  REQUIRE(header["model.emb.weight"]["dtype"] == "BF16");

  ConvertOptions sharded = to(TargetFormat::kSafetensors);
  sharded.max_shard_size = 256;
  const auto summary = dcpp::tools::convert_checkpoint(src, dir / "sharded.safetensors", sharded);
  REQUIRE(summary.files.size() > 2);
  const auto index_path = dir / "sharded.safetensors.index.json";
  REQUIRE(summary.files.back() == index_path);
  const json index = json::parse(dcpp::test::read_file(index_path));
  REQUIRE(index["weight_map"]["model.linear.weight"] ==
          "sharded-00001-of-0000" + std::to_string(summary.files.size() - 1) + ".safetensors");
  for (std::size_t i = 0; i + 1 < summary.files.size(); ++i) {
    // A shard is over the limit only when it holds a single tensor larger than the limit.
    auto shard = dcpp::tools::open_checkpoint_source(summary.files[i]);
    uint64_t bytes_in_shard = 0;
    for (const auto& entry : shard->entries()) bytes_in_shard += entry.nbytes();
    REQUIRE((bytes_in_shard <= 256 || shard->entries().size() == 1));
  }
  require_tensors_equal(src, index_path);
  REQUIRE(dcpp::tools::diff_checkpoints(dir / "model.safetensors", index_path)["equal"] == true);
  REQUIRE(run_cli("convert " + src.string() + " " + (dir / "x.pt").string() +
                  " --to torch-save --max-shard-size 1GB")
              .exit_code == 1);
}

TEST_CASE("convert --dtype casts floating tensors only") {
  dcpp::test::TempDir dir;
  const auto src = dcpp::test::fixture("single_rank_mixed");
  const auto cli =
      run_cli("convert " + src.string() + " " + (dir / "bf16").string() + " --to dcp --dtype bf16");
  INFO(cli.output);
  REQUIRE(cli.exit_code == 0);
  const json diff = dcpp::tools::diff_checkpoints(src, dir / "bf16");
  REQUIRE(diff["only_in_a"].empty());
  REQUIRE(diff["only_in_b"].empty());
  const json& weight = diff["changed"]["model.linear.weight"];
  REQUIRE(weight["change"] == "dtype");
  REQUIRE(weight["b"]["dtype"] == "BFloat16");
  REQUIRE(weight["max_rel_diff"].get<double>() <= 1.0 / 256);
  REQUIRE(weight["max_abs_diff"].get<double>() > 0);
  REQUIRE_FALSE(diff["changed"].contains("model.emb.weight"));  // bf16 already
  for (const auto& [key, change] : diff["changed"].items()) {
    INFO(key);
    REQUIRE(change["change"] == "dtype");
    REQUIRE(change["b"]["dtype"] == "BFloat16");
  }
  // Integers and bools untouched.
  auto converted = dcpp::tools::open_checkpoint_source(dir / "bf16");
  for (const auto& entry : converted->entries()) {
    if (entry.is_tensor && !at::isFloatingType(entry.dtype)) {
      REQUIRE(entry.dtype != at::kBFloat16);
    }
  }
  REQUIRE(run_cli("convert " + src.string() + " " + (dir / "x").string() + " --to dcp --dtype fp8")
              .exit_code != 0);
}

TEST_CASE("the progress bar draws on a terminal only") {
  std::FILE* out = std::tmpfile();
  {
    dcpp::tools::ProgressBar bar("convert", 2048, true, out);
    bar.advance(1024, "model.weight");
    bar.advance(1024, "model.bias");
  }
  std::rewind(out);
  std::string text(4096, '\0');
  text.resize(std::fread(text.data(), 1, text.size(), out));
  std::fclose(out);
  REQUIRE_THAT(text, Catch::Contains("100%"));
  REQUIRE_THAT(text, Catch::Contains("2.0 KiB / 2.0 KiB"));
  REQUIRE(text.back() == '\n');
  REQUIRE(dcpp::tools::parse_size("5GB") == 5000000000ULL);
  REQUIRE(dcpp::tools::parse_size("2GiB") == 2ULL << 30);
  REQUIRE(dcpp::tools::parse_size("300") == 300);
  REQUIRE_THROWS_AS(dcpp::tools::parse_size("5XB"), dcpp::CheckpointError);
}

TEST_CASE("hostile and wrong inputs are clear errors naming the file") {
  dcpp::test::TempDir dir;
  dcpp::test::write_file(dir / "bad.safetensors",
                         std::string("\xff\xff\xff\xff\xff\xff\xff\x7f", 8));
  auto cli = run_cli("convert " + (dir / "bad.safetensors").string() + " " +
                     (dir / "x.pt").string() + " --to torch-save");
  REQUIRE(cli.exit_code == 1);
  REQUIRE_THAT(cli.output, Catch::Contains("bad.safetensors"));
  REQUIRE(std::count(cli.output.begin(), cli.output.end(), '\n') == 1);
  REQUIRE_FALSE(std::filesystem::exists(dir / "x.pt"));

  dcpp::test::write_file(dir / "zip.pt", "PK\x03\x04 not really a zip");
  cli = run_cli("convert " + (dir / "zip.pt").string() + " " + (dir / "y").string() + " --to dcp");
  REQUIRE(cli.exit_code == 1);
  REQUIRE_THAT(cli.output, Catch::Contains("zip.pt"));

  // A truncated torch.save file.
  const std::string pt = dcpp::test::read_file(dcpp::test::fixture("torch_save_state_dict.pt"));
  dcpp::test::write_file(dir / "cut.pt", pt.substr(0, pt.size() / 2));
  cli = run_cli("convert " + (dir / "cut.pt").string() + " " + (dir / "z").string() + " --to dcp");
  REQUIRE(cli.exit_code == 1);
  REQUIRE_THAT(cli.output, Catch::Contains("cut.pt"));

  cli = run_cli("convert " + (dir / "nothing").string() + " " + (dir / "w").string() + " --to dcp");
  REQUIRE(cli.exit_code == 1);
  REQUIRE_THAT(cli.output, Catch::Contains("does not exist"));
}
