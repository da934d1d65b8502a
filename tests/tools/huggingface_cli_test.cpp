// The command line on Hugging Face directories: `convert --to hf` (values skipped with a note),
// and `inspect`, `verify`, `diff`, `convert` reading a directory.

#include "dcpp_test.h"
#include "tools_test_util.h"

#include "convert/checkpoint_source.h"
#include "diff/diff_command.h"
#include "inspect/inspect_command.h"
#include "verify/verify_command.h"

#include <dcpp/storage/huggingface_storage.h>

#include <nlohmann/json.hpp>

using dcpp::test::run_cli;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

// Every tensor of `a` is in `b` with the same dtype, shape and bytes; returns how many.
std::size_t count_equal_tensors(const fs::path& a, const fs::path& b) {
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
  return tensors;
}

}  // namespace

TEST_CASE("convert --to hf writes a Hugging Face directory, skipping values with a note") {
  dcpp::test::TempDir dir;
  const fs::path src = dcpp::test::fixture("single_rank_mixed");
  const auto cli = run_cli("convert " + src.string() + " " + (dir / "hf").string() +
                           " --to hf --max-shard-size 100");
  INFO(cli.output);
  REQUIRE(cli.exit_code == 0);
  CHECK_THAT(cli.output, Catch::Contains("note: skipped"));
  REQUIRE(fs::exists(dir / "hf" / dcpp::kHuggingFaceIndexFile));
  CHECK(dcpp::is_huggingface_directory(dir / "hf"));
  CHECK(count_equal_tensors(src, dir / "hf") > 0);
  // And back: a DCP checkpoint from the Hugging Face directory, equal to the original's tensors.
  REQUIRE(run_cli("convert " + (dir / "hf").string() + " " + (dir / "dcp").string() + " --to dcp")
              .exit_code == 0);
  CHECK(count_equal_tensors(dir / "hf", dir / "dcp") > 0);
  const json diff = dcpp::tools::diff_checkpoints(dir / "hf", dir / "dcp");
  CHECK(diff["equal"] == true);
  CHECK(run_cli("convert " + src.string() + " " + (dir / "hf").string() + " --to hf").exit_code ==
        1);  // the directory holds a checkpoint already
}

TEST_CASE("inspect, verify and diff read a Hugging Face directory") {
  const fs::path hf = dcpp::test::fixture("hf_consolidated", "2.14");
  const json inspection = dcpp::tools::inspect_checkpoint(hf, true);
  CHECK(inspection["format"] == "huggingface");
  REQUIRE(inspection["entries"].size() == 3);
  const json& w = inspection["entries"]["model.layers.0.w"];
  CHECK(w["dtype"] == "bfloat16");
  CHECK(w["shape"] == json::array({4, 4}));
  CHECK(w["chunks"][0]["file"] == "model-00001-of-00001.safetensors");
  const json manifest = json::parse(
      dcpp::test::read_file(dcpp::test::fixture("hf_consolidated.manifest.json", "2.14")));
  CHECK(inspection["entries"]["lm_head.weight"]["stats"]["sum"].get<double>() ==
        Approx(manifest["state_dict"]["items"]["lm_head.weight"]["sum"].get<double>()));
  const auto cli = run_cli("inspect --json --stats " + hf.string());
  REQUIRE(cli.exit_code == 0);
  CHECK(json::parse(cli.output)["entries"].size() == 3);

  const json report = dcpp::tools::verify_checkpoint(hf);
  INFO(report.dump());
  CHECK(report["ok"] == true);
  CHECK(report["format"] == "huggingface");
  CHECK(report["bytes_read"] == 512);
  CHECK(run_cli("verify " + hf.string()).exit_code == 0);

  // diff against the same directory copied: equal.
  dcpp::test::TempDir dir;
  dcpp::test::copy_tree(hf, dir / "copy");
  CHECK(dcpp::tools::diff_checkpoints(hf, dir / "copy")["equal"] == true);
}

TEST_CASE("verify reports a damaged Hugging Face directory, naming the file") {
  dcpp::test::TempDir dir;
  dcpp::test::copy_tree(dcpp::test::fixture("hf_consolidated", "2.14"), dir / "hf");
  const fs::path file = dir / "hf" / "model-00001-of-00001.safetensors";
  std::string bytes = dcpp::test::read_file(file);
  dcpp::test::write_file(file, bytes.substr(0, bytes.size() - 4));  // truncated
  const json report = dcpp::tools::verify_checkpoint(dir / "hf");
  CHECK(report["ok"] == false);
  REQUIRE(report["problems"].size() == 1);
  CHECK_THAT(report["problems"][0]["problem"].get<std::string>(),
             Catch::Contains("model-00001-of-00001.safetensors") && Catch::Contains("truncated"));
  // A stray file the index does not name.
  dcpp::test::write_file(file, bytes);
  dcpp::test::write_file(dir / "hf" / "extra.safetensors", bytes);
  const json stray = dcpp::tools::verify_checkpoint(dir / "hf");
  CHECK(stray["ok"] == false);
  CHECK(stray["problems"][0]["file"] == "extra.safetensors");
  CHECK(run_cli("verify " + (dir / "hf").string()).exit_code == 1);
}
