// Malformed, damaged and hostile checkpoints: each is a clear CheckpointError, never a crash, a
// hang or a read out of bounds (run under AddressSanitizer too).

#include "dcpp_test.h"

#include <dcpp/state_dict/python_object.h>

#include "format/metadata_pickle.h"
#include "format/zip/zip_blob_writer.h"

#include <dcpp/checkpoint/checkpointer.h>
#include <dcpp/core/checkpoint_error.h>

#include <fstream>
#include <random>

using dcpp::StateDict;
namespace fs = std::filesystem;

using dcpp::test::read_file;
using dcpp::test::write_file;

namespace {

// A small checkpoint: one tensor big enough to be read straight from the file, one small, a value.
void save_sample(const fs::path& dir) {
  StateDict sd;
  sd.insert("big", at::arange(200000, at::kFloat));
  sd.insert("small", at::arange(6, at::kFloat).reshape({2, 3}));
  sd.insert("step", 9);
  dcpp::SaveOptions options;
  options.file_system.sync_files = false;
  // The decoders' own defences, as for a checkpoint PyTorch wrote: a checksum file would refuse
  // every rewritten .metadata here before it is decoded.
  options.file_system.checksum_file = false;
  dcpp::save(sd, dir, options);
}

StateDict bad_input_target() {
  StateDict sd;
  sd.insert("big", at::zeros({200000}));
  sd.insert("small", at::zeros({2, 3}));
  sd.insert("step", 0);
  return sd;
}

void replace_once(std::string& bytes, const std::string& from, const std::string& to) {
  REQUIRE(from.size() == to.size());
  const auto at = bytes.find(from);
  REQUIRE(at != std::string::npos);
  bytes.replace(at, from.size(), to);
}

}  // namespace

TEST_CASE("a missing .metadata means no complete checkpoint") {
  dcpp::test::TempDir dir;
  StateDict target = bad_input_target();
  REQUIRE_THROWS_WITH(dcpp::load(target, dir.path()), Catch::Contains(".metadata is missing"));
}

TEST_CASE("a truncated .metadata is an error at every length") {
  dcpp::test::TempDir dir;
  save_sample(dir.path());
  const std::string metadata = read_file(dir / ".metadata");
  for (std::size_t length = 0; length < metadata.size(); ++length) {
    INFO("length " << length);
    write_file(dir / ".metadata", metadata.substr(0, length));
    StateDict target = bad_input_target();
    REQUIRE_THROWS_AS(dcpp::load(target, dir.path()), dcpp::CheckpointError);
  }
}

TEST_CASE("random byte flips in .metadata never crash") {
  dcpp::test::TempDir dir;
  save_sample(dir.path());
  const std::string metadata = read_file(dir / ".metadata");
  std::mt19937 random(1234);
  for (int trial = 0; trial < 300; ++trial) {
    std::string damaged = metadata;
    damaged[random() % damaged.size()] ^= static_cast<char>(1 + random() % 255);
    write_file(dir / ".metadata", damaged);
    StateDict target = bad_input_target();
    try {
      dcpp::load(target, dir.path());  // a flip inside a name or a number may still load
    } catch (const dcpp::CheckpointError&) {
    }
  }
}

TEST_CASE("a data file cut short names the file") {
  dcpp::test::TempDir dir;
  save_sample(dir.path());
  const std::string data = read_file(dir / "__0_0.distcp");
  for (std::size_t length : {std::size_t{0}, data.size() / 2, data.size() - 1}) {
    write_file(dir / "__0_0.distcp", data.substr(0, length));
    StateDict target = bad_input_target();
    REQUIRE_THROWS_WITH(dcpp::load(target, dir.path()),
                        Catch::Contains("__0_0.distcp") && Catch::Contains("truncated"));
  }
}

TEST_CASE("a flipped byte in tensor data fails the CRC check, naming file and key") {
  dcpp::test::TempDir dir;
  save_sample(dir.path());
  std::string data = read_file(dir / "__0_0.distcp");
  const dcpp::Metadata metadata = dcpp::read_metadata(dir.path());
  for (const auto& [index, info] : metadata.storage_data) {
    if (index.fqn != "big" && index.fqn != "small") {
      continue;
    }
    std::string damaged = data;
    // The payload is the largest record: flip a byte in the item's second half.
    damaged[static_cast<std::size_t>(info.offset + info.length / 2)] ^= 0x10;
    write_file(dir / "__0_0.distcp", damaged);
    StateDict target = bad_input_target();
    REQUIRE_THROWS_WITH(dcpp::load(target, dir.path()),
                        Catch::Contains("__0_0.distcp") && Catch::Contains("'" + index.fqn + "'"));
    // Without CRC checks, the damaged value loads silently: that is what the option means.
    dcpp::LoadOptions unchecked;
    unchecked.file_system.verify_checksums = false;
    try {
      dcpp::load(target, dir.path(), unchecked);
    } catch (const dcpp::CheckpointError&) {
      // a flip that lands in a header is still caught
    }
  }
}

TEST_CASE("a .metadata naming a file outside the checkpoint is refused") {
  for (const std::string path : {"../outside.distcp", "/etc/passwd", "a/../../b", ""}) {
    dcpp::test::TempDir dir;
    save_sample(dir.path());
    dcpp::Metadata metadata = dcpp::read_metadata(dir.path());
    metadata.storage_data.front().second.relative_path = path;
    write_file(dir / ".metadata", dcpp::detail::encode_metadata(metadata));
    StateDict target = bad_input_target();
    REQUIRE_THROWS_WITH(dcpp::load(target, dir.path()),
                        Catch::Contains("not inside the checkpoint directory"));
  }
}

TEST_CASE("an unknown dtype in .metadata is named") {
  dcpp::test::TempDir dir;
  save_sample(dir.path());
  std::string metadata = read_file(dir / ".metadata");
  replace_once(metadata, "float32", "fluxx32");
  write_file(dir / ".metadata", metadata);
  StateDict target = bad_input_target();
  REQUIRE_THROWS_WITH(dcpp::load(target, dir.path()), Catch::Contains("fluxx32"));
}

TEST_CASE("a pickle with a foreign global is refused before anything runs") {
  dcpp::test::TempDir dir;
  save_sample(dir.path());
  std::string metadata = read_file(dir / ".metadata");
  replace_once(metadata, "torch.serialization", "os_________________");
  write_file(dir / ".metadata", metadata.substr(0, metadata.size()));
  StateDict target = bad_input_target();
  REQUIRE_THROWS_WITH(dcpp::load(target, dir.path()), Catch::Contains("os_________________"));
}

TEST_CASE(
    "a bytes item holding a Python object loads as inert data; one that runs code is refused") {
  // Append to the data file a torch.save archive whose data.pkl builds an object, and point the
  // 'step' item at it.
  const auto load_step_pickled_as = [](const fs::path& dir, const std::string& pickle) {
    dcpp::detail::MemorySink archive;
    dcpp::detail::ZipBlobWriter zip(archive);
    zip.add("data.pkl", pickle.data(), pickle.size());
    zip.add("byteorder", "little", 6);
    zip.add("version", "3\n", 2);
    zip.finish();
    std::string data = read_file(dir / "__0_0.distcp");
    const int64_t offset = static_cast<int64_t>(data.size());
    write_file(dir / "__0_0.distcp", data + archive.buffer());
    dcpp::Metadata metadata = dcpp::read_metadata(dir);
    for (auto& [index, info] : metadata.storage_data) {
      if (index.fqn == "step") {
        info.offset = offset;
        info.length = static_cast<int64_t>(archive.buffer().size());
      }
    }
    write_file(dir / ".metadata", dcpp::detail::encode_metadata(metadata));
    StateDict target = bad_input_target();
    dcpp::load(target, dir);
    return target.at("step").value();
  };
  dcpp::test::TempDir dir;
  save_sample(dir / "foo");
  // __main__.Foo(): a class of the writer's own, kept as the call its pickle describes.
  static const char kFoo[] =
      "\x80\x02"
      "c__main__\nFoo\nq\x00)\x81q\x01.";
  const c10::IValue foo = load_step_pickled_as(dir / "foo", std::string(kFoo, sizeof kFoo - 1));
  const dcpp::PythonObject* object = dcpp::python_object_of(foo);
  REQUIRE(object != nullptr);
  CHECK(object->construction == dcpp::PythonConstruction::kNewObj);
  CHECK(object->class_name == "__main__.Foo");
  // os.system('ls'): refused, naming the global and the key, and never run.
  save_sample(dir / "system");
  static const char kSystem[] =
      "\x80\x02"
      "cos\nsystem\nq\x00X\x02\x00\x00\x00"
      "lsq\x01\x85q\x02Rq\x03.";
  REQUIRE_THROWS_WITH(
      load_step_pickled_as(dir / "system", std::string(kSystem, sizeof kSystem - 1)),
      Catch::Contains("os.system") && Catch::Contains("'step'") && Catch::Contains("runs code"));
}
