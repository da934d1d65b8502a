// Every command of the CLI on PyTorch 2.14's zstd-compressed and SAFETENSORS-format checkpoints
// (tests/fixtures/pytorch-2.14), and on dcpp's own `convert --to dcp --compress zstd`.

#include "dcpp_test.h"
#include "tools_test_util.h"

#include "diff/diff_command.h"
#include "verify/verify_command.h"

#include <dcpp/checkpoint/checkpointer.h>

#include <nlohmann/json.hpp>

using dcpp::test::run_cli;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

json manifest(const std::string& name) {
  return json::parse(
      dcpp::test::read_file(dcpp::test::fixture(name + ".manifest.json", "2.14")))["state_dict"];
}

bool has_key_problem(const json& report, const std::string& key, const std::string& text) {
  for (const json& p : report["problems"]) {
    if (p["key"] == key && p["problem"].get<std::string>().find(text) != std::string::npos) {
      return true;
    }
  }
  return false;
}

}  // namespace

TEST_CASE("inspect, verify, diff and convert read PyTorch 2.14's zstd and safetensors formats") {
  dcpp::test::TempDir dir;
  for (const std::string name : {"zstd_single", "safetensors_format"}) {
    INFO(name);
    const fs::path src = dcpp::test::fixture(name, "2.14");
    auto cli = run_cli("inspect --json --stats " + src.string());
    INFO(cli.output);
    REQUIRE(cli.exit_code == 0);
    const json inspection = json::parse(cli.output);
    const json expected = manifest(name)["items"];
    for (const std::string key : {"w", "enc.w"}) {
      if (!expected.contains(key)) continue;
      REQUIRE(inspection["entries"][key]["stats"]["sum"].get<double>() ==
              Approx(expected[key]["sum"].get<double>()).epsilon(1e-9));
      REQUIRE(inspection["entries"][key]["stats"]["abs_sum"].get<double>() ==
              Approx(expected[key]["abs_sum"].get<double>()).epsilon(1e-9));
    }
    if (name == "zstd_single") {
      REQUIRE(inspection["entries"]["w"]["chunks"][0]["transforms"] ==
              json::array({"stream.zstd/1"}));
      REQUIRE(inspection["entries"]["meta.note"]["value"] == "zstd");
    }

    const json report = dcpp::tools::verify_checkpoint(src);
    INFO(report.dump());
    REQUIRE(report["ok"] == true);
    cli = run_cli("verify " + src.string());
    REQUIRE(cli.exit_code == 0);

    // Every target format, and back: each equal to the fixture.
    const fs::path out = dir / name;
    fs::create_directories(out);
    REQUIRE(run_cli("convert " + src.string() + " " + (out / "x.pt").string() + " --to torch-save")
                .exit_code == 0);
    REQUIRE(
        run_cli("convert " + src.string() + " " + (out / "dcp").string() + " --to dcp").exit_code ==
        0);
    REQUIRE(run_cli("convert " + src.string() + " " + (out / "zstd").string() +
                    " --to dcp --compress zstd")
                .exit_code == 0);
    for (const char* converted : {"x.pt", "dcp", "zstd"}) {
      INFO(converted);
      const json diff = dcpp::tools::diff_checkpoints(src, out / converted);
      INFO(diff.dump());
      REQUIRE(diff["equal"] == true);
    }
    if (name == "safetensors_format") {  // tensors only: safetensors holds them all
      REQUIRE(run_cli("convert " + src.string() + " " + (out / "x.safetensors").string() +
                      " --to safetensors")
                  .exit_code == 0);
      REQUIRE(dcpp::tools::diff_checkpoints(src, out / "x.safetensors")["equal"] == true);
    }
    cli = run_cli("diff " + src.string() + " " + (out / "zstd").string());
    REQUIRE(cli.exit_code == 0);
    REQUIRE(dcpp::tools::verify_checkpoint(out / "zstd")["checksum_file"] == "checked");
    for (const auto& [index, info] : dcpp::read_metadata(out / "zstd").storage_data) {
      REQUIRE(info.transform_descriptors == std::vector<std::string>{"stream.zstd/1"});
    }
  }
}

TEST_CASE("convert --compress applies to dcp only, at zstd's levels") {
  dcpp::test::TempDir dir;
  const std::string src = dcpp::test::fixture("zstd_single", "2.14").string();
  auto cli = run_cli("convert " + src + " " + (dir / "x.pt").string() +
                     " --to torch-save --compress zstd");
  REQUIRE(cli.exit_code != 0);
  REQUIRE_THAT(cli.output, Catch::Contains("--compress applies to --to dcp only"));
  cli = run_cli("convert " + src + " " + (dir / "d").string() + " --to dcp --compress lz4");
  REQUIRE(cli.exit_code != 0);
  cli = run_cli("convert " + src + " " + (dir / "e").string() +
                " --to dcp --compress zstd --compress-level 19");
  REQUIRE(cli.exit_code == 0);
  REQUIRE(dcpp::tools::diff_checkpoints(src, dir / "e")["equal"] == true);
}

TEST_CASE("verify names the key of a damaged zstd item, with and without a checksum file") {
  dcpp::test::TempDir dir;
  const fs::path ckpt = dir / "ckpt";
  REQUIRE(run_cli("convert " + dcpp::test::fixture("zstd_single", "2.14").string() + " " +
                  ckpt.string() + " --to dcp --compress zstd")
              .exit_code == 0);
  dcpp::StorageInfo info;
  for (const auto& [index, stored] : dcpp::read_metadata(ckpt).storage_data) {
    if (index.fqn == "w") info = stored;
  }
  dcpp::test::flip_byte(ckpt / info.relative_path, info.offset + info.length / 2);
  json report = dcpp::tools::verify_checkpoint(ckpt);
  INFO(report.dump());
  REQUIRE(report["ok"] == false);
  REQUIRE(has_key_problem(report, "w", "CRC-32"));
  REQUIRE(report["problems"].size() == 1);
  fs::remove(ckpt / ".checksums");
  report = dcpp::tools::verify_checkpoint(ckpt);
  REQUIRE(report["ok"] == false);
  REQUIRE(has_key_problem(report, "w", "zstd"));
}

TEST_CASE("verify of a hostile zstd frame stops at the item's bound, in bounded memory") {
  dcpp::test::TempDir dir;
  const fs::path ckpt = dir / "ckpt";
  REQUIRE(run_cli("convert " + dcpp::test::fixture("zstd_single", "2.14").string() + " " +
                  ckpt.string() + " --to dcp --compress zstd")
              .exit_code == 0);
  fs::remove(ckpt / ".checksums");
  const auto [intact_status, intact_peak] =
      dcpp::test::run_measuring_memory(std::string(DCPP_CLI) + " verify " + ckpt.string());
  REQUIRE(intact_status == 0);
  // The item of 'w' (40x24 floats) overwritten in place by a frame that claims no size and
  // repeats one byte in RLE blocks of 4 bytes for 128 KiB each, for as long as the item's length
  // allows: about 100 MiB of output, where the bound is 3840 + 64 KiB + 128 bytes.
  dcpp::StorageInfo info;
  for (const auto& [index, stored] : dcpp::read_metadata(ckpt).storage_data) {
    if (index.fqn == "w") info = stored;
  }
  std::string frame("\x28\xb5\x2f\xfd\x00\x38", 6);
  const int64_t blocks = (info.length - 6) / 4;
  for (int64_t i = 0; i < blocks; ++i) {
    const uint32_t header = (uint32_t{128 * 1024} << 3) | 2u | (i + 1 == blocks ? 1u : 0u);
    frame += static_cast<char>(header & 0xff);
    frame += static_cast<char>((header >> 8) & 0xff);
    frame += static_cast<char>((header >> 16) & 0xff);
    frame += 'A';
  }
  frame.resize(static_cast<std::size_t>(info.length), '\0');
  std::string data = dcpp::test::read_file(ckpt / info.relative_path);
  data.replace(static_cast<std::size_t>(info.offset), frame.size(), frame);
  dcpp::test::write_file(ckpt / info.relative_path, data);
  const auto [status, peak] =
      dcpp::test::run_measuring_memory(std::string(DCPP_CLI) + " verify " + ckpt.string());
  REQUIRE(status == 1);
  REQUIRE(blocks * (128 << 10) > 64 * (1 << 20));
  REQUIRE(peak < intact_peak + 16 * (1 << 20));
  const json report = dcpp::tools::verify_checkpoint(ckpt);
  INFO(report.dump());
  REQUIRE(has_key_problem(report, "w", "bound of 69504 bytes"));
}
