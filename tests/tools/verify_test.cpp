#include "dcpp_test.h"
#include "tools_test_util.h"

#include "common/chunk_coverage.h"
#include "verify/verify_command.h"

#include <dcpp/checkpoint/checkpointer.h>

#include <nlohmann/json.hpp>

#include <fstream>

using dcpp::test::run_cli;
using nlohmann::json;

namespace {

// A checkpoint with a tensor of distinctive bytes (1234.5f at element 100) and a value.
std::filesystem::path make_checkpoint(const dcpp::test::TempDir& dir) {
  dcpp::StateDict state;
  at::Tensor big = at::arange(4096, at::kFloat);
  big[100] = 1234.5f;
  state.insert("model", dcpp::StateDict());
  state.at("model").dict().insert("big", big);
  state.insert("step", 7);
  dcpp::save(state, dir / "ckpt");
  return dir / "ckpt";
}

std::string float_bytes(float value) { return std::string(reinterpret_cast<char*>(&value), 4); }

bool has_file_problem(const json& report, const std::string& file, const std::string& text) {
  for (const json& p : report["problems"]) {
    if (p["file"] == file && p["problem"].get<std::string>().find(text) != std::string::npos) {
      return true;
    }
  }
  return false;
}

}  // namespace

TEST_CASE("verify passes PyTorch's checkpoints and dcpp's, reading every byte") {
  for (const char* name : {"single_rank_mixed", "model_optim_adam", "two_rank_sharded"}) {
    const json report = dcpp::tools::verify_checkpoint(dcpp::test::fixture(name));
    INFO(name << ": " << report.dump());
    REQUIRE(report["ok"] == true);
    REQUIRE(report["problems"].empty());
    // Every byte of every tensor is read (and the other records besides).
    uint64_t tensor_bytes = 0;
    for (const auto& [key, stored] :
         dcpp::read_metadata(dcpp::test::fixture(name)).state_dict_metadata) {
      if (const auto* tensor = std::get_if<dcpp::TensorStorageMetadata>(&stored)) {
        uint64_t n = c10::elementSize(tensor->properties.dtype);
        for (int64_t size : tensor->size) n *= static_cast<uint64_t>(size);
        tensor_bytes += n;
      }
    }
    REQUIRE(report["bytes_read"].get<uint64_t>() > tensor_bytes);
  }
  dcpp::test::TempDir dir;
  const auto ckpt = make_checkpoint(dir);
  const auto ok = run_cli("verify " + ckpt.string());
  REQUIRE(ok.exit_code == 0);
  REQUIRE_THAT(ok.output, Catch::Contains("ok: "));
  REQUIRE_THAT(ok.output, Catch::Contains("2 entries, 2 items in 1 files"));
}

TEST_CASE("verify names the file and key of a flipped byte") {
  dcpp::test::TempDir dir;
  const auto ckpt = make_checkpoint(dir);
  const auto data = ckpt / "__0_0.distcp";
  const int64_t at = dcpp::test::find_bytes(data, float_bytes(1234.5f));
  REQUIRE(at > 0);
  dcpp::test::flip_byte(data, at);
  const json report = dcpp::tools::verify_checkpoint(ckpt);
  REQUIRE(report["ok"] == false);
  REQUIRE(report["problems"].size() == 1);
  REQUIRE(report["problems"][0]["file"] == "__0_0.distcp");
  REQUIRE(report["problems"][0]["key"] == "model.big");
  // One problem for the item: its CRC-32 against the checksum file, and the record that differs.
  const std::string problem = report["problems"][0]["problem"].get<std::string>();
  REQUIRE_THAT(problem, Catch::Contains("the checksum file records"));
  REQUIRE_THAT(problem, Catch::Contains("zip record 'data/0' has CRC-32"));

  const auto cli = run_cli("verify " + ckpt.string());
  REQUIRE(cli.exit_code == 1);
  REQUIRE_THAT(cli.output, Catch::Contains("problem: file __0_0.distcp, key 'model.big': "));
  REQUIRE_THAT(cli.output, Catch::Contains("1 problem"));
}

TEST_CASE("verify checks the CRC-32 of every record, not only the tensor data") {
  dcpp::test::TempDir dir;
  const auto ckpt = make_checkpoint(dir);
  const auto data = ckpt / "__0_0.distcp";
  // The `byteorder` record of the first item: "little".
  const int64_t at = dcpp::test::find_bytes(data, "little");
  REQUIRE(at > 0);
  dcpp::test::flip_byte(data, at + 2);
  const json with_checksums = dcpp::tools::verify_checkpoint(ckpt);
  REQUIRE(with_checksums["ok"] == false);
  REQUIRE(has_file_problem(with_checksums, "__0_0.distcp", "zip record 'byteorder' has CRC-32"));
  // Without the checksum file (as PyTorch writes checkpoints): the record's own CRC-32.
  std::filesystem::remove(ckpt / ".checksums");
  const json report = dcpp::tools::verify_checkpoint(ckpt);
  REQUIRE(report["checksum_file"] == "absent");
  REQUIRE(has_file_problem(report, "__0_0.distcp", "zip record 'byteorder' has CRC-32"));
}

TEST_CASE("verify finds bytes no zip CRC-32 covers, and a damaged .metadata or checksum file") {
  dcpp::test::TempDir dir;
  const auto ckpt = make_checkpoint(dir);
  const auto data = ckpt / "__0_0.distcp";
  const dcpp::Metadata metadata = dcpp::read_metadata(ckpt);
  int64_t big = -1;
  for (const auto& [index, info] : metadata.storage_data) {
    if (index.fqn == "model.big") big = info.offset;
  }
  REQUIRE(big >= 0);
  const std::string pristine = dcpp::test::read_file(data);
  // The padding of the item's first record: a 'Z' no CRC-32 covers.
  const std::size_t padding = pristine.find("ZZZZ", static_cast<std::size_t>(big));
  REQUIRE(padding != std::string::npos);
  dcpp::test::flip_byte(data, static_cast<int64_t>(padding));
  json report = dcpp::tools::verify_checkpoint(ckpt);
  REQUIRE(report["checksum_file"] == "checked");
  REQUIRE(report["problems"].size() == 1);
  REQUIRE(report["problems"][0]["key"] == "model.big");
  REQUIRE_THAT(report["problems"][0]["problem"].get<std::string>(),
               Catch::Contains("the checksum file records") &&
                   Catch::Contains("alignment padding is not 'Z' bytes"));

  dcpp::test::write_file(data, pristine);
  const std::string metadata_bytes = dcpp::test::read_file(ckpt / ".metadata");
  std::string flipped = metadata_bytes;
  flipped[flipped.size() / 3] ^= 0x20;
  dcpp::test::write_file(ckpt / ".metadata", flipped);
  report = dcpp::tools::verify_checkpoint(ckpt);
  REQUIRE(report["ok"] == false);
  REQUIRE(report["problems"][0]["file"] == ".metadata");
  REQUIRE_THAT(report["problems"][0]["problem"].get<std::string>(), Catch::Contains("is damaged"));

  dcpp::test::write_file(ckpt / ".metadata", metadata_bytes);
  std::string checksums = dcpp::test::read_file(ckpt / ".checksums");
  checksums.resize(checksums.size() - 3);
  dcpp::test::write_file(ckpt / ".checksums", checksums);
  report = dcpp::tools::verify_checkpoint(ckpt);
  REQUIRE(report["checksum_file"] == "unusable");
  REQUIRE(report["problems"].size() == 1);
  REQUIRE(report["problems"][0]["file"] == ".checksums");
  const auto cli = run_cli("verify " + ckpt.string());
  REQUIRE(cli.exit_code == 1);
  REQUIRE_THAT(cli.output, Catch::Contains("problem: file .checksums: checksum file "));
}

TEST_CASE("verify and load name the first item past the end of a truncated file") {
  dcpp::test::TempDir dir;
  const auto ckpt = make_checkpoint(dir);
  const auto data = ckpt / "__0_0.distcp";
  const std::string pristine = dcpp::test::read_file(data);
  for (const auto& [index, info] : dcpp::read_metadata(ckpt).storage_data) {
    dcpp::test::write_file(data, pristine.substr(0, static_cast<std::size_t>(info.offset + 1)));
    const json report = dcpp::tools::verify_checkpoint(ckpt);
    INFO(report.dump());
    REQUIRE(report["problems"][0]["file"] == "__0_0.distcp");
    REQUIRE(report["problems"][0]["key"] == index.fqn);
    REQUIRE_THAT(report["problems"][0]["problem"].get<std::string>(), Catch::Contains("truncated"));
    dcpp::StateDict target;
    target.insert("model", dcpp::StateDict());
    target.at("model").dict().insert("big", at::zeros({4096}));
    target.insert("step", 0);
    REQUIRE_THROWS_WITH(dcpp::load(target, ckpt), Catch::Contains(data.string()) &&
                                                      Catch::Contains("key '" + index.fqn + "'") &&
                                                      Catch::Contains("truncated"));
  }
}

TEST_CASE("verify finds a truncated file, a missing file and an unreferenced file") {
  dcpp::test::TempDir dir;
  const auto ckpt = make_checkpoint(dir);
  const auto data = ckpt / "__0_0.distcp";
  SECTION("truncated") {
    std::filesystem::resize_file(data, std::filesystem::file_size(data) - 100);
    const json report = dcpp::tools::verify_checkpoint(ckpt);
    REQUIRE(report["ok"] == false);
    REQUIRE(has_file_problem(report, "__0_0.distcp", "truncated"));
    const auto cli = run_cli("verify --json " + ckpt.string());
    REQUIRE(cli.exit_code == 1);
    REQUIRE(json::parse(cli.output)["problems"][0]["file"] == "__0_0.distcp");
  }
  SECTION("missing") {
    std::filesystem::remove(data);
    const json report = dcpp::tools::verify_checkpoint(ckpt);
    REQUIRE(has_file_problem(report, "__0_0.distcp", "missing"));
    REQUIRE(report["problems"].size() == 1);
  }
  SECTION("unreferenced") {
    std::filesystem::copy_file(data, ckpt / "__1_0.distcp");
    const json report = dcpp::tools::verify_checkpoint(ckpt);
    REQUIRE(report["problems"].size() == 1);
    REQUIRE(has_file_problem(report, "__1_0.distcp", "unreferenced"));
  }
  SECTION("stray bytes after the last item") {
    std::string bytes = dcpp::test::read_file(data);
    dcpp::test::write_file(data, bytes + "junk");
    const json report = dcpp::tools::verify_checkpoint(ckpt);
    REQUIRE(report["problems"].size() == 1);
    REQUIRE(has_file_problem(report, "__0_0.distcp", "belong to no item"));
  }
  SECTION("no .metadata") {
    std::filesystem::remove(ckpt / ".metadata");
    const auto cli = run_cli("verify " + ckpt.string());
    REQUIRE(cli.exit_code == 1);
    REQUIRE_THAT(cli.output, Catch::Contains("problem: file .metadata: missing"));
  }
  SECTION("a malformed .metadata") {
    dcpp::test::write_file(ckpt / ".metadata", "\x80\x04garbage");
    const json report = dcpp::tools::verify_checkpoint(ckpt);
    REQUIRE(report["ok"] == false);
    REQUIRE(report["problems"][0]["file"] == ".metadata");
  }
}

TEST_CASE("verify --json and inspect --json print keys that are not UTF-8") {
  // A damaged .metadata can hold any bytes in a key; the JSON output replaces what is invalid.
  dcpp::test::TempDir dir;
  dcpp::StateDict state;
  state.insert("bad\xff\xfekey", at::ones({2}));
  dcpp::save(state, dir / "ckpt");
  const auto verify = run_cli("verify --json " + (dir / "ckpt").string());
  INFO(verify.output);
  REQUIRE(verify.exit_code == 0);
  REQUIRE(json::parse(verify.output)["ok"] == true);
  const auto inspect = run_cli("inspect --json " + (dir / "ckpt").string());
  REQUIRE(inspect.exit_code == 0);
  REQUIRE(json::parse(inspect.output)["entries"].size() == 1);
}

TEST_CASE("chunk coverage finds overlaps, gaps and chunks outside the tensor") {
  using dcpp::ChunkStorageMetadata;
  using dcpp::tools::chunk_coverage_problems;
  REQUIRE(chunk_coverage_problems({4, 6}, {{{0, 0}, {2, 6}}, {{2, 0}, {2, 3}}, {{2, 3}, {2, 3}}})
              .empty());
  REQUIRE(chunk_coverage_problems({}, {{{}, {}}}).empty());
  REQUIRE(chunk_coverage_problems({0, 3}, {{{0, 0}, {0, 3}}}).empty());
  const auto overlap = chunk_coverage_problems({4, 6}, {{{0, 0}, {3, 6}}, {{2, 0}, {2, 6}}});
  REQUIRE(overlap.size() == 1);
  REQUIRE_THAT(overlap[0], Catch::Contains("overlaps"));
  const auto gap = chunk_coverage_problems({4, 6}, {{{0, 0}, {2, 6}}});
  REQUIRE(gap == std::vector<std::string>{"the chunks cover 12 of the tensor's 24 elements"});
  const auto outside = chunk_coverage_problems({4}, {{{2}, {3}}});
  REQUIRE_THAT(outside.at(0), Catch::Contains("reaches outside"));
}

TEST_CASE("verify passes Megatron-Core's checkpoints and finds a damaged byte in one") {
  for (const std::string name : {"mcore_tp2", "mcore_legacy_common_pt"}) {
    const json report = dcpp::tools::verify_checkpoint(dcpp::test::megatron_fixture(name));
    INFO(name << ": " << report.dump());
    CHECK(report["ok"] == true);
    CHECK(report["problems"].empty());
  }
  dcpp::test::TempDir dir;
  const std::filesystem::path copy = dir / "mcore_tp2";
  std::filesystem::copy(dcpp::test::megatron_fixture("mcore_tp2"), copy);
  std::filesystem::permissions(copy / "__1_0.distcp", std::filesystem::perms::owner_write,
                               std::filesystem::perm_options::add);
  {
    std::fstream file(copy / "__1_0.distcp", std::ios::in | std::ios::out | std::ios::binary);
    file.seekg(2000);
    const char byte = static_cast<char>(file.get());
    file.seekp(2000);
    file.put(static_cast<char>(byte ^ 0x40));
  }
  const json report = dcpp::tools::verify_checkpoint(copy);
  INFO(report.dump());
  CHECK(report["ok"] == false);
  REQUIRE(!report["problems"].empty());
  CHECK(report["problems"][0]["file"] == "__1_0.distcp");
}

TEST_CASE("verify checks Megatron-Core's integrity.json") {
  dcpp::test::TempDir dir;
  const std::filesystem::path copy = dir / "mcore_tp2";
  std::filesystem::copy(dcpp::test::megatron_fixture("mcore_tp2"), copy);
  std::ofstream(copy / "integrity.json")
      << R"({"algorithm": "sha256", "files": {"metadata.json": "0000"}})";
  const json report = dcpp::tools::verify_checkpoint(copy);
  INFO(report.dump());
  CHECK(report["ok"] == false);
  CHECK(report["integrity_file"] == "failed");
  REQUIRE(report["problems"].size() == 1);
  CHECK(report["problems"][0]["file"] == "integrity.json");
  std::ifstream in(dcpp::test::megatron_fixture("mcore_tp2.manifest.json"));
  const std::string digest = json::parse(in)["files"]["metadata.json"]["sha256"].get<std::string>();
  std::ofstream(copy / "integrity.json", std::ios::trunc)
      << R"({"algorithm": "sha256", "files": {"metadata.json": ")" << digest << R"("}})";
  const json good = dcpp::tools::verify_checkpoint(copy);
  INFO(good.dump());
  CHECK(good["ok"] == true);
  CHECK(good["integrity_file"] == "checked");
}
