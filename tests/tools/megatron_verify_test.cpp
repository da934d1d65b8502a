// `dcpp verify` on Megatron-Core checkpoints refuses what dcpp's readers refuse: hostile variants
// of the fixtures in tests/fixtures/megatron-core (a damaged metadata.json, a legacy common.pt
// whose pickle calls os.system or holds no dict, a ShardedObject key that does not parse and so
// leaves its object's grid short) are each refused by some reader, and every one by verify.

#include "dcpp_test.h"
#include "tools_test_util.h"

#include "verify/verify_command.h"

#include "format/byte_io.h"
#include "format/item_codec.h"
#include "format/metadata_pickle.h"
#include "format/pickle/pickle_writer.h"

#include <dcpp/checkpoint/checkpointer.h>
#include <dcpp/checkpoint/megatron.h>
#include <dcpp/core/checkpoint_error.h>

#include <nlohmann/json.hpp>

#include <functional>
#include <string>
#include <vector>

using dcpp::test::run_cli;
using nlohmann::json;

namespace {

namespace fs = std::filesystem;

// A writable copy of Megatron fixture `name` at `to`.
fs::path copy_megatron_fixture(const std::string& name, const fs::path& to) {
  fs::copy(dcpp::test::megatron_fixture(name), to, fs::copy_options::recursive);
  for (const fs::directory_entry& entry : fs::directory_iterator(to)) {
    fs::permissions(entry.path(), fs::perms::owner_write, fs::perm_options::add);
  }
  return to;
}

// What each of dcpp's readers of a Megatron checkpoint says of `dir`: the errors, one per reader
// that refuses it (empty when every reader reads it).
std::vector<std::string> reader_refusals(const fs::path& dir) {
  const std::vector<std::function<void()>> readers = {
      [&] { dcpp::read_metadata(dir); },
      [&] { dcpp::megatron::load_common_state_dict(dir); },
      [&] { dcpp::megatron::load_sharded_metadata(dir); },
  };
  std::vector<std::string> refusals;
  for (const auto& read : readers) {
    try {
      read();
    } catch (const c10::Error& e) {
      refusals.push_back(e.what_without_backtrace());
    }
  }
  return refusals;
}

// A torch.save archive whose pickle is `pickle` (no tensors).
std::string archive_of_pickle(const std::string& pickle) {
  dcpp::detail::MemorySink sink;
  dcpp::detail::write_pickled_bytes_item(sink, pickle, {});
  return sink.buffer();
}

// `os.system(command)` as pickle.dumps writes it.
std::string os_system_pickle(const std::string& command) {
  dcpp::detail::PickleWriter w(2);
  w.put_global("os", "system");
  w.put_tuple(1, [&] { w.put_str(command); });
  w.reduce();
  return w.finish();
}

// Renames the item `from` of the checkpoint in `dir` to `to` in its `.metadata`.
void rename_item(const fs::path& dir, const std::string& from, const std::string& to) {
  dcpp::Metadata metadata = dcpp::detail::decode_metadata(dcpp::test::read_file(dir / ".metadata"),
                                                          (dir / ".metadata").string());
  bool found = false;
  for (auto& [key, stored] : metadata.state_dict_metadata) {
    if (key == from) {
      key = to;
      found = true;
    }
  }
  REQUIRE(found);
  for (auto& [index, info] : metadata.storage_data) {
    if (index.fqn == from) index.fqn = to;
  }
  dcpp::test::write_file(dir / ".metadata", dcpp::detail::encode_metadata(metadata));
}

bool mentions(const json& report, const std::string& text) {
  return report.dump().find(text) != std::string::npos;
}

}  // namespace

TEST_CASE("verify refuses every hostile Megatron checkpoint that dcpp's readers refuse") {
  dcpp::test::TempDir dir;
  struct Hostile {
    std::string name;
    fs::path path;
    std::string expected;  // what verify's report must mention
  };
  std::vector<Hostile> hostile;

  // metadata.json, as Megatron's commit, in every shape a reader refuses.
  const std::vector<std::pair<std::string, std::string>> configs = {
      {"not_json", "this is not JSON"},
      {"array", "[1,2]"},
      {"empty", ""},
      {"deep", std::string(200000, '[') + std::string(200000, ']')},
      {"nul", std::string("{\"sharded_backend\": \"torch\0dist\"}", 33)},
      {"null_backend", R"({"sharded_backend": null})"},
      {"string_version", R"({"sharded_backend": "torch_dist", "sharded_backend_version": "1"})"},
      {"zarr_common",
       R"({"sharded_backend": "torch_dist", "sharded_backend_version": 1, "common_backend": "zarr"})"},
      {"huge_version", R"({"sharded_backend": "torch_dist", "sharded_backend_version": 1e400})"},
      {"zarr", R"({"sharded_backend": "zarr"})"},
  };
  for (const auto& [name, config] : configs) {
    const fs::path path = copy_megatron_fixture("mcore_tp2", dir / ("config_" + name));
    dcpp::test::write_file(path / "metadata.json", config);
    hostile.push_back({"metadata.json " + name, path, "metadata.json"});
  }

  // A legacy common.pt whose pickle would run a shell command, and one that holds no dict.
  const fs::path marker = dir / "ran";
  const fs::path system = copy_megatron_fixture("mcore_legacy_common_pt", dir / "os_system");
  dcpp::test::write_file(system / "common.pt",
                         archive_of_pickle(os_system_pickle("touch " + marker.string())));
  hostile.push_back({"common.pt calling os.system", system, "os.system"});
  const fs::path list = copy_megatron_fixture("mcore_legacy_common_pt", dir / "common_list");
  dcpp::detail::MemorySink list_sink;
  dcpp::detail::write_bytes_item(list_sink, c10::IValue(c10::List<int64_t>({1, 2})));
  dcpp::test::write_file(list / "common.pt", list_sink.buffer());
  hostile.push_back({"common.pt holding a list", list, "common.pt"});

  // A ShardedObject key that does not parse: train_state's shard 0 of 2 is then missing too.
  const fs::path bad_key = copy_megatron_fixture("mcore_tp2", dir / "bad_key");
  rename_item(bad_key, "train_state/shard_0_2", "train_state/shard_x.y_zz");
  hostile.push_back({"an object key that does not parse", bad_key, "train_state/shard_x.y_zz"});

  for (const Hostile& h : hostile) {
    INFO(h.name);
    const std::vector<std::string> refusals = reader_refusals(h.path);
    REQUIRE_FALSE(refusals.empty());  // a checkpoint dcpp itself refuses
    const json report = dcpp::tools::verify_checkpoint(h.path);
    INFO(report.dump());
    CHECK(report["ok"] == false);
    CHECK(mentions(report, h.expected));
  }
  CHECK_FALSE(fs::exists(marker));

  // The missing shard is named as such, beside the key that does not parse.
  const json bad_key_report = dcpp::tools::verify_checkpoint(bad_key);
  CHECK(mentions(bad_key_report, "(0,) of ShardedObject 'train_state'"));

  // On the command line: a nonzero exit and a line naming the file.
  const auto cli = run_cli("verify " + (dir / "config_zarr_common").string());
  INFO(cli.output);
  CHECK(cli.exit_code != 0);
  CHECK_THAT(cli.output, Catch::Contains("problem: file metadata.json"));
  CHECK_THAT(cli.output, Catch::Contains("common_backend"));

  // The fixtures themselves are read by every reader, and verified ok.
  for (const std::string name : {"mcore_tp2", "mcore_legacy_common_pt"}) {
    INFO(name);
    CHECK(reader_refusals(dcpp::test::megatron_fixture(name)).empty());
    const json report = dcpp::tools::verify_checkpoint(dcpp::test::megatron_fixture(name));
    INFO(report.dump());
    CHECK(report["ok"] == true);
  }
  // And so is a fixture whose .metadata was re-encoded unchanged (what rename_item writes).
  const fs::path same = copy_megatron_fixture("mcore_tp2", dir / "reencoded");
  rename_item(same, "train_state/shard_0_2", "train_state/shard_0_2");
  CHECK(reader_refusals(same).empty());
  CHECK(dcpp::tools::verify_checkpoint(same)["ok"] == true);
}
