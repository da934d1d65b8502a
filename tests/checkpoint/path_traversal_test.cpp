// Path traversal: the file names in `.metadata` are untrusted. A load reads only files inside the
// checkpoint directory, judged on the names alone, before it opens any: no "..", no ".", no
// absolute path, no empty name, no NUL byte. Each test plants a valid copy of the data file where
// the hostile name points, so that a missing check would load it, not merely fail to find it.
// Backslashes are ordinary characters on Linux; symlinks inside the directory are followed, as
// Python's DCP follows them (docs/reliability.md, "Hostile input").

#include "dcpp_test.h"

#include "format/metadata_pickle.h"

#include <dcpp/checkpoint/checkpointer.h>
#include <dcpp/core/checkpoint_error.h>

using dcpp::StateDict;
namespace fs = std::filesystem;

using dcpp::test::read_file;
using dcpp::test::write_file;

namespace {

/// A checkpoint at <root>/ckpt: a tensor read straight from the file, a small one and a value,
/// all in ckpt/__0_0.distcp.
fs::path save_sample(const dcpp::test::TempDir& root) {
  StateDict sd;
  sd.insert("big", at::arange(100000, at::kFloat));
  sd.insert("small", at::arange(6, at::kDouble).reshape({2, 3}));
  sd.insert("step", 9);
  dcpp::SaveOptions options;
  options.file_system.sync_files = false;
  // The tests rewrite .metadata: without a checksum file, which would refuse it before the checks
  // under test.
  options.file_system.checksum_file = false;
  dcpp::save(sd, root / "ckpt", options);
  return root / "ckpt";
}

StateDict sample_target() {
  StateDict sd;
  sd.insert("big", at::zeros({100000}));
  sd.insert("small", at::zeros({2, 3}, at::kDouble));
  sd.insert("step", 0);
  return sd;
}

/// Loads `checkpoint` and requires the sample's values, bit for bit.
void require_sample_loads(const fs::path& checkpoint) {
  StateDict target = sample_target();
  dcpp::load(target, checkpoint);
  REQUIRE(dcpp::test::bitwise_equal(target.find("big")->tensor(), at::arange(100000, at::kFloat)));
  REQUIRE(dcpp::test::bitwise_equal(target.find("small")->tensor(),
                                    at::arange(6, at::kDouble).reshape({2, 3})));
  REQUIRE(target.find("step")->value().toInt() == 9);
}

/// Replaces the checkpoint's .metadata. A hostile one comes without a checksum file: the one dcpp
/// wrote, which records the original .metadata, is removed.
void write_metadata(const fs::path& checkpoint, const std::string& bytes) {
  write_file(checkpoint / ".metadata", bytes);
  fs::remove(checkpoint / ".checksums");
}

/// Points every storage entry of the checkpoint's .metadata at `name`.
void rename_data_file_in_metadata(const fs::path& checkpoint, const std::string& name) {
  dcpp::Metadata metadata = dcpp::read_metadata(checkpoint);
  for (auto& [index, info] : metadata.storage_data) info.relative_path = name;
  write_metadata(checkpoint, dcpp::detail::encode_metadata(metadata));
}

}  // namespace

TEST_CASE("file names in .metadata that leave the checkpoint directory are refused") {
  dcpp::test::TempDir root;
  const fs::path checkpoint = save_sample(root);
  const std::string data = read_file(checkpoint / "__0_0.distcp");
  // Valid copies of the data file where each hostile name leads.
  write_file(root / "outside.distcp", data);
  fs::create_directories(checkpoint / "a");
  const std::string absolute = (root / "outside.distcp").string();
  const std::string pristine = read_file(checkpoint / ".metadata");
  for (const std::string& name :
       {std::string("../outside.distcp"), std::string("a/../../outside.distcp"), absolute,
        std::string("/etc/passwd"), std::string("a/../__0_0.distcp"), std::string("./__0_0.distcp"),
        std::string(".."), std::string("."), std::string("")}) {
    INFO("relative_path '" << name << "'");
    write_metadata(checkpoint, pristine);
    rename_data_file_in_metadata(checkpoint, name);
    REQUIRE_THROWS_WITH(dcpp::read_metadata(checkpoint),
                        Catch::Contains("not inside the checkpoint directory") &&
                            Catch::Contains("refusing to read it"));
    StateDict target = sample_target();
    REQUIRE_THROWS_WITH(dcpp::load(target, checkpoint),
                        Catch::Contains("not inside the checkpoint directory"));
    REQUIRE_THROWS_WITH(dcpp::load_from_keys(checkpoint),
                        Catch::Contains("not inside the checkpoint directory"));
    // Nothing was loaded.
    REQUIRE(target.find("step")->value().toInt() == 0);
  }
  // The copies are valid: the same names would load if the check were not there.
  write_metadata(checkpoint, pristine);
  require_sample_loads(checkpoint);
}

TEST_CASE("a NUL byte in a file name is refused and not cut short") {
  dcpp::test::TempDir root;
  const fs::path checkpoint = save_sample(root);
  write_file(root / "outside.distcp", read_file(checkpoint / "__0_0.distcp"));
  const std::string pristine = read_file(checkpoint / ".metadata");
  // Cut at the NUL, the names would be the real data file, or lead out of the checkpoint. The
  // message shows the NUL escaped: what() is a C string, a raw NUL would end it there.
  for (const std::string& name : {std::string("__0_0.distcp\0.tmp", 17),
                                  std::string("__0_0.distcp\0/../../outside.distcp", 34)}) {
    INFO("relative_path of " << name.size() << " bytes");
    write_metadata(checkpoint, pristine);
    rename_data_file_in_metadata(checkpoint, name);
    StateDict target = sample_target();
    REQUIRE_THROWS_WITH(dcpp::load(target, checkpoint),
                        Catch::Contains(".relative_path '__0_0.distcp\\x00") &&
                            Catch::Contains("holds a NUL byte, which no file name can"));
    REQUIRE(target.find("step")->value().toInt() == 0);
  }
}

TEST_CASE("backslashes in file names are ordinary characters on Linux") {
  dcpp::test::TempDir root;
  const fs::path checkpoint = save_sample(root);
  // A decoy where a Windows reading of the name would lead: it must not be read.
  write_file(root / "outside.distcp", "not a checkpoint");
  const std::string name = "..\\outside.distcp";
  fs::rename(checkpoint / "__0_0.distcp", checkpoint / name);
  rename_data_file_in_metadata(checkpoint, name);
  require_sample_loads(checkpoint);
  REQUIRE(fs::exists(checkpoint / name));
}

TEST_CASE("a symlink inside the checkpoint is followed as DCP follows it") {
  // The check is on the names in .metadata; the directory itself is trusted: whoever can place a
  // symlink in it can replace the data file too. dcpp opens data files as Python's open() does.
  dcpp::test::TempDir root;
  const fs::path checkpoint = save_sample(root);
  fs::create_directories(root / "elsewhere");
  fs::rename(checkpoint / "__0_0.distcp", root / "elsewhere" / "data.distcp");
  fs::create_symlink(root / "elsewhere" / "data.distcp", checkpoint / "__0_0.distcp");
  require_sample_loads(checkpoint);
  // A symlinked subdirectory too.
  fs::create_directory_symlink(root / "elsewhere", checkpoint / "shards");
  rename_data_file_in_metadata(checkpoint, "shards/data.distcp");
  require_sample_loads(checkpoint);
}
