// The command line on checkpoints saved without collectives (`__<rank>.metadata` per rank): PyTorch
// 2.14's fixture and one dcpp saved rank by rank.

#include "tools_test_util.h"

#include <dcpp/checkpoint/checkpointer.h>

#include <nlohmann/json.hpp>

#include <fstream>
#include <set>
#include <sstream>

namespace fs = std::filesystem;
using dcpp::test::run_cli;
using nlohmann::json;

namespace {

const fs::path kFixture = fs::path(DCPP_TEST_FIXTURES) / "pytorch-2.14" / "no_collectives_3";

json json_of(const std::string& output) {
  const std::size_t start = output.find('{');
  REQUIRE(start != std::string::npos);
  return json::parse(output.substr(start));
}

// Three ranks' parts of one state, saved one after another without collectives.
void save_per_rank(const fs::path& dir) {
  for (int rank = 0; rank < 3; ++rank) {
    std::vector<dcpp::Shard> shards{
        {at::arange(4, at::kFloat).add(4 * rank).reshape({2, 2}), {2 * rank, 0}}};
    dcpp::StateDict sd;
    sd.insert("rows", dcpp::ShardedTensor({6, 2}, std::move(shards), at::kFloat));
    sd.insert("bias", at::linspace(0, 1, 3));
    sd.insert("step", 5);
    dcpp::SaveOptions options;
    options.use_collectives = false;
    options.ranks.rank = rank;
    options.file_system.sync_files = false;
    dcpp::save(sd, dir, options);
  }
}

}  // namespace

TEST_CASE("dcpp inspect --json --stats reads PyTorch's per-rank checkpoint as one") {
  const auto result = run_cli("inspect --json --stats " + kFixture.string());
  INFO(result.output);
  REQUIRE(result.exit_code == 0);
  const json report = json_of(result.output);
  const json& rows = report["entries"]["a_rows"];
  REQUIRE(rows["shape"] == json::array({11, 3}));
  REQUIRE(rows["chunks"].size() == 3);
  std::set<int> ranks;
  for (const json& chunk : rows["chunks"]) ranks.insert(chunk["rank"].get<int>());
  REQUIRE(ranks == std::set<int>{0, 1, 2});
  REQUIRE(report["entries"]["own_2"]["stats"]["sum"].get<double>() == 6.0);
  REQUIRE(report["entries"]["step"]["value"].get<int>() == 9);
  std::ifstream in(kFixture.string() + ".manifest.json");
  const json manifest = json::parse(in)["state_dict"]["items"];
  REQUIRE(rows["stats"]["sum"].get<double>() ==
          Approx(manifest["a_rows"]["sum"].get<double>()).epsilon(1e-12));
}

TEST_CASE("dcpp verify, diff and convert work on per-rank checkpoints") {
  dcpp::test::TempDir dir;
  const auto verified = run_cli("verify --json " + kFixture.string());
  INFO(verified.output);
  REQUIRE(verified.exit_code == 0);
  const json report = json_of(verified.output);
  REQUIRE(report["metadata_files"] ==
          json::array({"__0.metadata", "__1.metadata", "__2.metadata"}));
  REQUIRE(report["items"].get<int>() == 9);  // every rank's step, a_rows rows and own_<r>
  REQUIRE(report["entries"].get<int>() == 5);
  REQUIRE(report["checksum_file"] == "absent");

  const fs::path pt = dir / "whole.pt";
  REQUIRE(
      run_cli("convert " + kFixture.string() + " " + pt.string() + " --to torch-save").exit_code ==
      0);
  REQUIRE(run_cli("convert " + kFixture.string() + " " + (dir / "dcp").string() + " --to dcp")
              .exit_code == 0);
  REQUIRE(fs::exists(dir / "dcp" / ".metadata"));
  REQUIRE(run_cli("diff " + kFixture.string() + " " + pt.string()).exit_code == 0);
  REQUIRE(run_cli("diff " + kFixture.string() + " " + (dir / "dcp").string()).exit_code == 0);
  REQUIRE(run_cli("verify " + (dir / "dcp").string()).exit_code == 0);
}

TEST_CASE("dcpp verify checks dcpp's per-rank checksum files and names gaps") {
  dcpp::test::TempDir dir;
  const fs::path ckpt = dir / "ckpt";
  save_per_rank(ckpt);
  const auto ok = run_cli("verify --json " + ckpt.string());
  INFO(ok.output);
  REQUIRE(ok.exit_code == 0);
  REQUIRE(json_of(ok.output)["checksum_file"] == "checked");
  REQUIRE(json_of(ok.output)["items"].get<int>() == 9);

  // One byte of rank 2's replica of "bias" (which loads read from rank 0): verify still finds it.
  // Its byte range, from rank 2's checksum file: "item <file> <offset> <length> <crc> <key>".
  std::istringstream lines(dcpp::test::read_file(ckpt / "__2.checksums"));
  int64_t at = -1;
  for (std::string line; std::getline(lines, line);) {
    if (line.size() > 5 && line.compare(line.size() - 5, 5, "\tbias") == 0) {
      std::istringstream fields(line);
      std::string tag, file;
      int64_t offset = 0, length = 0;
      fields >> tag >> file >> offset >> length;
      REQUIRE(file == "__2_0.distcp");
      at = offset + length / 2;
    }
  }
  REQUIRE(at > 0);
  const std::string bytes = dcpp::test::read_file(ckpt / "__2_0.distcp");
  dcpp::test::flip_byte(ckpt / "__2_0.distcp", at);
  const auto damaged = run_cli("verify " + ckpt.string());
  INFO(damaged.output);
  REQUIRE(damaged.exit_code == 1);
  REQUIRE(damaged.output.find("__2_0.distcp") != std::string::npos);
  dcpp::test::write_file(ckpt / "__2_0.distcp", bytes);

  fs::remove(ckpt / "__1.metadata");
  const auto gap = run_cli("verify " + ckpt.string());
  INFO(gap.output);
  REQUIRE(gap.exit_code == 1);
  REQUIRE(gap.output.find("__1.metadata is missing") != std::string::npos);
}
