// The checksum file and the zip layout check, one piece at a time: what the corruption harness
// measures in bulk.

#include "dcpp_test.h"

#include "format/checksum_file.h"
#include "format/crc32.h"
#include "format/item_codec.h"
#include "format/zip/zip_blob_reader.h"
#include "format/zip/zip_layout_check.h"

#include <dcpp/checkpoint/checkpointer.h>
#include <dcpp/core/checkpoint_error.h>

namespace fs = std::filesystem;
using dcpp::StateDict;
using dcpp::detail::ItemChecksum;
using dcpp::detail::SaveChecksums;

namespace {

dcpp::SaveOptions quick_save() {
  dcpp::SaveOptions options;
  options.file_system.sync_files = false;
  return options;
}

StateDict sample(float fill) {
  StateDict state;
  state.insert("w", at::full({4, 3}, fill));
  state.insert("step", static_cast<int64_t>(fill));
  return state;
}

StateDict zeros() {
  StateDict state;
  state.insert("w", at::zeros({4, 3}));
  state.insert("step", 0);
  return state;
}

std::string load_error(const fs::path& dir, dcpp::LoadOptions options = {}) {
  StateDict target = zeros();
  try {
    dcpp::load(target, dir, options);
  } catch (const dcpp::CheckpointError& error) {
    return error.what_without_backtrace();
  }
  return "";
}

// The item of `key` in the checkpoint at `dir`.
dcpp::StorageInfo item_of(const fs::path& dir, const std::string& key) {
  for (const auto& [index, info] : dcpp::read_metadata(dir).storage_data) {
    if (index.fqn == key) return info;
  }
  FAIL("no item " << key);
  return {};
}

}  // namespace

TEST_CASE("the checksum file round-trips any name and refuses every damaged byte") {
  std::vector<SaveChecksums> saves(2);
  saves[0].metadata_size = 1234;
  saves[0].metadata_crc32 = 0xdeadbeef;
  saves[0].items = std::vector<ItemChecksum>{
      {"__0_0.distcp", 0, 700, 0x01020304, "model.w"},
      {"__1_0.distcp", 700, 5, 0xffffffff, "odd\tkey\nwith %25 and \x01"}};
  saves[1].metadata_size = 99;
  saves[1].metadata_crc32 = 7;  // items unknown
  const std::string bytes = dcpp::detail::encode_checksum_file(saves);
  // The format itself (checksum_file.h), byte for byte: files written before read the same.
  const std::string body =
      "dcpp-checksums 1\n"
      "metadata\t1234\tdeadbeef\t2\n"
      "item\t__0_0.distcp\t0\t700\t01020304\tmodel.w\n"
      "item\t__1_0.distcp\t700\t5\tffffffff\todd%09key%0awith %2525 and %01\n"
      "metadata\t99\t00000007\t-\n"
      "end\t";
  CHECK(bytes.substr(0, body.size()) == body);
  CHECK(bytes.size() == body.size() + 9);  // the CRC-32 in 8 hex digits, then a newline
  const auto decoded = dcpp::detail::decode_checksum_file(bytes, "ckpt/.checksums");
  REQUIRE(decoded.size() == 2);
  REQUIRE(decoded[0].metadata_size == 1234);
  REQUIRE(decoded[0].metadata_crc32 == 0xdeadbeef);
  REQUIRE(decoded[0].items->size() == 2);
  REQUIRE(decoded[0].items->at(1).key == "odd\tkey\nwith %25 and \x01");
  REQUIRE(decoded[0].items->at(1).crc32 == 0xffffffff);
  REQUIRE(decoded[0].items->at(1).offset == 700);
  REQUIRE_FALSE(decoded[1].items.has_value());

  // Every single-bit flip, and every truncation, is refused as damage naming the file.
  for (std::size_t at = 0; at < bytes.size(); ++at) {
    for (int bit = 0; bit < 8; ++bit) {
      std::string damaged = bytes;
      damaged[at] = static_cast<char>(damaged[at] ^ (1 << bit));
      INFO("byte " << at << " bit " << bit);
      REQUIRE_THROWS_WITH(dcpp::detail::decode_checksum_file(damaged, "ckpt/.checksums"),
                          Catch::Contains("checksum file ckpt/.checksums is damaged"));
    }
  }
  for (std::size_t length = 0; length < bytes.size(); ++length) {
    INFO("length " << length);
    REQUIRE_THROWS_WITH(
        dcpp::detail::decode_checksum_file(bytes.substr(0, length), "ckpt/.checksums"),
        Catch::Contains("is damaged"));
  }
}

TEST_CASE("save writes a checksum file that lists every item and matches .metadata") {
  dcpp::test::TempDir dir;
  dcpp::save(sample(2), dir.path(), quick_save());
  const std::string metadata = dcpp::test::read_file(dir / ".metadata");
  const auto saves =
      dcpp::detail::decode_checksum_file(dcpp::test::read_file(dir / ".checksums"), ".checksums");
  REQUIRE(saves.size() == 1);
  REQUIRE(saves[0].metadata_size == metadata.size());
  REQUIRE(saves[0].metadata_crc32 == dcpp::detail::crc32(0, metadata.data(), metadata.size()));
  const std::string data = dcpp::test::read_file(dir / "__0_0.distcp");
  REQUIRE(saves[0].items->size() == 2);
  for (const ItemChecksum& item : *saves[0].items) {
    const dcpp::StorageInfo info = item_of(dir.path(), item.key);
    REQUIRE(item.file == info.relative_path);
    REQUIRE(item.offset == static_cast<uint64_t>(info.offset));
    REQUIRE(item.length == static_cast<uint64_t>(info.length));
    // Folded from the records' CRC-32s as written: equal to the CRC-32 of the bytes on disk.
    REQUIRE(item.crc32 == dcpp::detail::crc32(0, data.data() + item.offset, item.length));
  }
}

TEST_CASE("a byte no zip CRC-32 covers is found by the checksum file, else by the layout check") {
  dcpp::test::TempDir dir;
  dcpp::save(sample(3), dir.path(), quick_save());
  const dcpp::StorageInfo w = item_of(dir.path(), "w");
  const fs::path data = dir / "__0_0.distcp";
  const std::string pristine = dcpp::test::read_file(data);
  // The first local header's time field: no CRC-32 covers it, and the reader does not use it.
  std::string damaged = pristine;
  damaged[static_cast<std::size_t>(w.offset) + 10] ^= 0x40;
  dcpp::test::write_file(data, damaged);
  const std::string with_checksums = load_error(dir.path());
  REQUIRE_THAT(with_checksums, Catch::Contains(data.string()) && Catch::Contains("key 'w'") &&
                                   Catch::Contains("the checksum file records"));

  fs::remove(dir / ".checksums");
  const std::string format_only = load_error(dir.path());
  REQUIRE_THAT(format_only, Catch::Contains(data.string()) && Catch::Contains("key 'w'") &&
                                Catch::Contains("time or date differs"));

  dcpp::LoadOptions unchecked;
  unchecked.file_system.verify_checksums = false;
  REQUIRE(load_error(dir.path(), unchecked).empty());
}

TEST_CASE("a damaged .metadata is named before it is decoded: changed, truncated or extended") {
  dcpp::test::TempDir dir;
  dcpp::save(sample(4), dir.path(), quick_save());
  const fs::path path = dir / ".metadata";
  const std::string pristine = dcpp::test::read_file(path);
  std::string flipped = pristine;
  flipped[pristine.size() / 2] ^= 0x01;
  dcpp::test::write_file(path, flipped);
  REQUIRE_THAT(load_error(dir.path()),
               Catch::Contains(path.string() + " is damaged") && Catch::Contains("changed"));
  dcpp::test::write_file(path, pristine.substr(0, 100));
  REQUIRE_THAT(load_error(dir.path()), Catch::Contains("truncated at byte 100"));
  dcpp::test::write_file(path, pristine + "x");
  REQUIRE_THAT(load_error(dir.path()), Catch::Contains("bytes were added"));
  REQUIRE_THROWS_WITH(dcpp::read_metadata(dir.path()), Catch::Contains("is damaged"));
  dcpp::test::write_file(path, pristine);
  REQUIRE(load_error(dir.path()).empty());
}

TEST_CASE("a damaged checksum file is an error that says so, and can be deleted") {
  dcpp::test::TempDir dir;
  dcpp::save(sample(5), dir.path(), quick_save());
  std::string bytes = dcpp::test::read_file(dir / ".checksums");
  bytes[20] ^= 0x02;
  dcpp::test::write_file(dir / ".checksums", bytes);
  REQUIRE_THAT(load_error(dir.path()),
               Catch::Contains((dir / ".checksums").string() + " is damaged") &&
                   Catch::Contains("delete it"));
  fs::remove(dir / ".checksums");
  StateDict loaded = zeros();
  dcpp::load(loaded, dir.path());
  REQUIRE(loaded.at("w").tensor().equal(at::full({4, 3}, 5.0f)));
}

TEST_CASE("a replacing save keeps the replaced checkpoint verifiable until .metadata is renamed") {
  dcpp::test::TempDir dir;
  dcpp::save(sample(1), dir / "ckpt", quick_save());
  fs::copy(dir / "ckpt", dir / "before");
  dcpp::SaveOptions overwrite = quick_save();
  overwrite.file_system.overwrite = true;
  dcpp::save(sample(2), dir / "ckpt", overwrite);
  StateDict loaded = zeros();
  dcpp::load(loaded, dir / "ckpt");
  REQUIRE(loaded.at("w").tensor().equal(at::full({4, 3}, 2.0f)));

  // A save that died between its two renames leaves the old .metadata and data files beside the
  // new checksum file: the old checkpoint must still load, its items still checked.
  fs::copy_file(dir / "ckpt" / ".checksums", dir / "before" / ".checksums",
                fs::copy_options::overwrite_existing);
  const auto saves = dcpp::detail::decode_checksum_file(
      dcpp::test::read_file(dir / "before" / ".checksums"), ".checksums");
  REQUIRE(saves.size() == 2);
  REQUIRE(saves[1].items.has_value());
  dcpp::load(loaded, dir / "before");
  REQUIRE(loaded.at("w").tensor().equal(at::full({4, 3}, 1.0f)));
  std::string data = dcpp::test::read_file(dir / "before" / "__0_0.distcp");
  data[static_cast<std::size_t>(item_of(dir / "before", "w").offset) + 12] ^= 0x01;
  dcpp::test::write_file(dir / "before" / "__0_0.distcp", data);
  REQUIRE_THAT(load_error(dir / "before"), Catch::Contains("the checksum file records"));

  // The next replacing save carries only the entry of the .metadata it replaces.
  dcpp::save(sample(3), dir / "ckpt", overwrite);
  REQUIRE(dcpp::detail::decode_checksum_file(dcpp::test::read_file(dir / "ckpt" / ".checksums"),
                                             ".checksums")
              .size() == 2);
}

TEST_CASE("every byte flip of an item is found: by its CRC-32, and by the format's checks") {
  dcpp::detail::MemorySink sink;
  const at::Tensor tensor = at::arange(24, at::kFloat).reshape({4, 6});
  const dcpp::detail::WrittenItem written = dcpp::detail::write_tensor_item(sink, tensor);
  const std::string pristine = sink.buffer();
  REQUIRE(written.length == pristine.size());
  REQUIRE(written.crc32 == dcpp::detail::crc32(0, pristine.data(), pristine.size()));
  const ItemChecksum expected{"f", 0, pristine.size(), written.crc32, "t"};
  const auto read = [&](const std::string& bytes, const ItemChecksum* checksum) {
    const dcpp::detail::MemorySource source(bytes, "item 't'");
    dcpp::detail::TensorReadRequest request;
    request.dest = at::empty({4, 6});
    request.storage_offsets = {0, 0};
    request.lengths = {4, 6};
    request.expected_dtype = at::kFloat;
    request.expected_chunk_sizes = {4, 6};
    dcpp::detail::read_tensor_item(source, request, true, checksum);
    return request.dest;
  };
  REQUIRE(read(pristine, &expected).equal(tensor));
  REQUIRE(read(pristine, nullptr).equal(tensor));

  for (std::size_t at = 0; at < pristine.size(); ++at) {
    for (const int mask : {0x01, 0x80, 0xff}) {
      std::string damaged = pristine;
      damaged[at] = static_cast<char>(damaged[at] ^ mask);
      INFO("byte " << at << " mask " << mask);
      REQUIRE_THROWS_WITH(read(damaged, &expected), Catch::Contains("item 't'"));
      REQUIRE_THROWS_WITH(read(damaged, nullptr), Catch::Contains("item 't'"));
    }
  }
}

TEST_CASE("every item of PyTorch's checkpoints passes the layout check") {
  std::vector<fs::path> roots{dcpp::test::fixture("")};
  const fs::path shared = fs::path(DCPP_SHARED_FIXTURES);
  if (fs::exists(shared)) roots.push_back(shared);
  int items = 0;
  for (const fs::path& root : roots) {
    for (const auto& entry : fs::directory_iterator(root)) {
      if (!fs::exists(entry.path() / ".metadata")) continue;
      for (const auto& [index, info] : dcpp::read_metadata(entry.path()).storage_data) {
        const std::string data = dcpp::test::read_file(entry.path() / info.relative_path);
        const dcpp::detail::MemorySource source(
            std::string_view(data).substr(static_cast<std::size_t>(info.offset),
                                          static_cast<std::size_t>(info.length)),
            entry.path().string() + " " + index.fqn);
        const dcpp::detail::ZipBlobReader zip(source);
        INFO(source.describe());
        REQUIRE_NOTHROW(dcpp::detail::check_pytorch_layout(zip));
        ++items;
      }
    }
    const std::string pt = dcpp::test::read_file(root / "torch_save_state_dict.pt");
    const dcpp::detail::MemorySource source(pt, "torch_save_state_dict.pt");
    REQUIRE_NOTHROW(dcpp::detail::check_pytorch_layout(dcpp::detail::ZipBlobReader(source)));
  }
  REQUIRE(items > 20);
}

TEST_CASE("every byte flip of a value item is found, by its CRC-32 and by the format's checks") {
  dcpp::detail::MemorySink sink;
  const c10::IValue value = c10::ivalue::Tuple::create({int64_t{5}, at::arange(8, at::kByte)});
  const dcpp::detail::WrittenItem written = dcpp::detail::write_bytes_item(sink, value);
  const std::string pristine = sink.buffer();
  REQUIRE(written.crc32 == dcpp::detail::crc32(0, pristine.data(), pristine.size()));
  const ItemChecksum expected{"f", 0, pristine.size(), written.crc32, "v"};
  const auto read = [&](const std::string& bytes, const ItemChecksum* checksum) {
    const dcpp::detail::MemorySource source(bytes, "item 'v'");
    return dcpp::detail::read_bytes_item(source, true, checksum);
  };
  const c10::IValue back = read(pristine, nullptr);
  REQUIRE(back.toTupleRef().elements()[0].toInt() == 5);
  REQUIRE(back.toTupleRef().elements()[1].toTensor().equal(at::arange(8, at::kByte)));
  for (std::size_t at = 0; at < pristine.size(); ++at) {
    std::string damaged = pristine;
    damaged[at] = static_cast<char>(damaged[at] ^ 0x10);
    INFO("byte " << at);
    REQUIRE_THROWS_WITH(read(damaged, &expected), Catch::Contains("item 'v'"));
    REQUIRE_THROWS_WITH(read(damaged, nullptr), Catch::Contains("item 'v'"));
  }
}

TEST_CASE("an empty tensor's item is read, and so checked, by a load") {
  for (const bool checksums : {true, false}) {
    dcpp::test::TempDir dir;
    StateDict state;
    state.insert("e", at::empty({0, 3}));
    dcpp::SaveOptions options = quick_save();
    options.file_system.checksum_file = checksums;
    dcpp::save(state, dir.path(), options);
    const dcpp::StorageInfo item = item_of(dir.path(), "e");
    std::string data = dcpp::test::read_file(dir / "__0_0.distcp");
    data[static_cast<std::size_t>(item.offset + item.length - 3)] ^= 0x01;  // the end record
    dcpp::test::write_file(dir / "__0_0.distcp", data);
    StateDict target;
    target.insert("e", at::empty({0, 3}));
    INFO("checksum file: " << checksums);
    REQUIRE_THROWS_WITH(dcpp::load(target, dir.path()),
                        Catch::Contains("__0_0.distcp") && Catch::Contains("key 'e'"));
  }
}
