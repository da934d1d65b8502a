// `dcpp inspect` on a `torch.save` file and on safetensors (one file or a sharded index): the same
// listing, JSON, stats and tree as for a DCP checkpoint of the same state.

#include "dcpp_test.h"
#include "tools_test_util.h"

#include "inspect/inspect_command.h"

#include <nlohmann/json.hpp>

using dcpp::test::run_cli;
using nlohmann::json;
namespace fs = std::filesystem;

TEST_CASE("inspect reads torch.save and safetensors files as it reads a DCP checkpoint") {
  dcpp::test::TempDir dir;
  const fs::path src = dcpp::test::fixture("single_rank_mixed");
  const json dcp = dcpp::tools::inspect_checkpoint(src, true);
  REQUIRE(run_cli("convert " + src.string() + " " + (dir / "x.pt").string() + " --to torch-save")
              .exit_code == 0);
  REQUIRE(run_cli("convert " + src.string() + " " + (dir / "x.safetensors").string() +
                  " --to safetensors")
              .exit_code == 0);
  REQUIRE(run_cli("convert " + src.string() + " " + (dir / "s.safetensors").string() +
                  " --to safetensors --max-shard-size 256")
              .exit_code == 0);
  struct Case {
    std::string file;
    std::string format;
    bool nested;  // paths kept (torch.save) or flat keys (safetensors)
  };
  for (const Case& c :
       {Case{"x.pt", "torch-save", true}, Case{"x.safetensors", "safetensors", false},
        Case{"s.safetensors.index.json", "safetensors", false}}) {
    INFO(c.file);
    const auto cli = run_cli("inspect --json --stats " + (dir / c.file).string());
    INFO(cli.output);
    REQUIRE(cli.exit_code == 0);
    const json inspection = json::parse(cli.output);
    REQUIRE(inspection["format"] == c.format);
    REQUIRE(inspection["entries"].size() == dcp["entries"].size());
    uint64_t tensor_bytes = 0;
    for (const auto& [key, expected] : dcp["entries"].items()) {
      INFO(key);
      const json& entry = inspection["entries"][key];
      REQUIRE(entry["kind"] == expected["kind"]);
      REQUIRE(entry["path"] == (c.nested ? expected["path"] : json::array({key})));
      if (expected["kind"] == "tensor") {
        REQUIRE(entry["dtype"] == expected["dtype"]);
        REQUIRE(entry["shape"] == expected["shape"]);
        REQUIRE(entry["stats"] == expected["stats"]);
        REQUIRE(entry["chunks"].size() == 1);
        const std::string file = entry["chunks"][0]["file"];
        REQUIRE(inspection["files"].contains(file));
        REQUIRE(entry["bytes"] == entry["chunks"][0]["length"]);
        tensor_bytes += entry["bytes"].get<uint64_t>();
      } else {
        REQUIRE(entry["value"] == expected["value"]);
      }
    }
    uint64_t file_bytes = 0;
    for (const auto& [name, file] : inspection["files"].items()) {
      INFO(name);
      REQUIRE(file["size"].get<uint64_t>() == fs::file_size(dir / name));
      file_bytes += file["bytes"].get<uint64_t>();
    }
    REQUIRE(file_bytes == tensor_bytes);
    REQUIRE(inspection["top_level"].contains(c.nested ? "model" : "model.linear.weight"));

    const auto text = run_cli("inspect --tree " + (dir / c.file).string());
    INFO(text.output);
    REQUIRE(text.exit_code == 0);
    REQUIRE_THAT(text.output, Catch::Contains(c.nested ? "model/\n" : "model.linear.weight  "));
    REQUIRE_THAT(text.output, Catch::Contains("files:\n"));
  }
  const auto listing = run_cli("inspect " + (dir / "x.pt").string());
  REQUIRE(listing.exit_code == 0);
  REQUIRE_THAT(listing.output, Catch::Contains("format torch-save"));
  REQUIRE_THAT(listing.output, Catch::Contains("model.linear.weight"));

  dcpp::test::write_file(dir / "junk.safetensors", "not safetensors");
  const auto junk = run_cli("inspect " + (dir / "junk.safetensors").string());
  REQUIRE(junk.exit_code == 1);
  REQUIRE_THAT(junk.output, Catch::Contains("junk.safetensors"));
}
