// zstd-compressed items (DCP's `stream.zstd/1`, docs/format.md): dcpp writes them bit for bit
// readable, and reads hostile ones without letting a small frame take more memory than the item's
// bound: every refusal is a CheckpointError naming the file, the key and what is wrong.

#include "dcpp_test.h"

#include "format/byte_io.h"
#include "format/metadata_pickle.h"
#include "format/zstd_stream.h"

#include <dcpp/checkpoint/checkpointer.h>
#include <dcpp/core/checkpoint_error.h>

#include <sys/resource.h>

using dcpp::CheckpointError;
using dcpp::StateDict;
namespace fs = std::filesystem;

namespace {

dcpp::SaveOptions zstd_save(bool checksum_file = true) {
  dcpp::SaveOptions options;
  options.file_system.sync_files = false;
  options.file_system.checksum_file = checksum_file;
  options.file_system.with_compression(dcpp::Compression::kZstd);
  return options;
}

at::Tensor sample(at::ScalarType dtype, at::IntArrayRef shape) {
  if (dtype == at::kBool) return at::rand(shape) > 0.5;
  if (at::isIntegralType(dtype, /*includeBool=*/false)) {
    return at::randint(0, 100, shape).to(dtype);
  }
  if (at::isComplexType(dtype)) return at::complex(at::randn(shape), at::randn(shape)).to(dtype);
  return at::randn(shape).to(dtype);
}

// A zstd frame without a content size that decompresses to `blocks` x 128 KiB of one byte: RLE
// blocks of 4 bytes each, so 1 GiB takes 32 KiB.
std::string rle_frame(uint64_t blocks) {
  std::string frame("\x28\xb5\x2f\xfd", 4);
  frame += '\x00';                     // frame header: no content size, no checksum
  frame += static_cast<char>(7 << 3);  // window 2^17 = 128 KiB
  for (uint64_t i = 0; i < blocks; ++i) {
    const uint32_t header = (uint32_t{128 * 1024} << 3) | (1u << 1) | (i + 1 == blocks ? 1u : 0u);
    frame += static_cast<char>(header & 0xff);
    frame += static_cast<char>((header >> 8) & 0xff);
    frame += static_cast<char>((header >> 16) & 0xff);
    frame += 'A';
  }
  return frame;
}

// The same, declaring its content size in the header.
std::string sized_frame(uint64_t content_size) {
  std::string frame("\x28\xb5\x2f\xfd", 4);
  frame += static_cast<char>(3 << 6);  // an 8-byte content size, not a single segment
  frame += static_cast<char>(7 << 3);
  for (int i = 0; i < 8; ++i) frame += static_cast<char>((content_size >> (8 * i)) & 0xff);
  const uint32_t header = (uint32_t{128 * 1024} << 3) | (1u << 1) | 1u;
  frame += static_cast<char>(header & 0xff);
  frame += static_cast<char>((header >> 8) & 0xff);
  frame += static_cast<char>((header >> 16) & 0xff);
  frame += 'A';
  return frame;
}

dcpp::Metadata read_metadata_file(const fs::path& dir) {
  return dcpp::detail::decode_metadata(dcpp::test::read_file(dir / ".metadata"), ".metadata");
}

void write_metadata_file(const fs::path& dir, const dcpp::Metadata& metadata) {
  dcpp::test::write_file(dir / ".metadata", dcpp::detail::encode_metadata(metadata));
}

dcpp::StorageInfo& storage_of(dcpp::Metadata& metadata, const std::string& key) {
  for (auto& [index, info] : metadata.storage_data) {
    if (index.fqn == key) return info;
  }
  FAIL("no storage entry for " << key);
  throw std::logic_error("unreachable");
}

// Replaces the stored bytes of `key` by `bytes`, appended to its data file.
void replace_item(const fs::path& dir, const std::string& key, const std::string& bytes) {
  dcpp::Metadata metadata = read_metadata_file(dir);
  dcpp::StorageInfo& info = storage_of(metadata, key);
  std::string data = dcpp::test::read_file(dir / info.relative_path);
  info.offset = static_cast<int64_t>(data.size());
  info.length = static_cast<int64_t>(bytes.size());
  dcpp::test::write_file(dir / info.relative_path, data + bytes);
  write_metadata_file(dir, metadata);
}

StateDict small_state() {
  StateDict state;
  state.insert("w", at::arange(16, at::kFloat).reshape({4, 4}));
  state.insert("step", int64_t{7});
  return state;
}

int64_t peak_rss_kib() {
  struct rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss;
}

}  // namespace

TEST_CASE("a zstd checkpoint round-trips bit for bit across dtypes, values and layouts") {
  dcpp::test::TempDir dir;
  StateDict original;
  const at::ScalarType dtypes[] = {at::kFloat, at::kDouble, at::kHalf,         at::kBFloat16,
                                   at::kLong,  at::kInt,    at::kShort,        at::kChar,
                                   at::kByte,  at::kBool,   at::kComplexFloat, at::kComplexDouble};
  for (at::ScalarType dtype : dtypes) {
    original.insert(std::string("t_") + c10::toString(dtype), sample(dtype, {33, 17}));
  }
  original.insert("zeros", at::zeros({256, 256}));  // compresses well
  original.insert("scalar", at::tensor(3.5));
  original.insert("empty", at::zeros({0, 5}));
  original.insert("noncontig", at::arange(12, at::kFloat).reshape({3, 4}).t());
  original.insert("step", int64_t{42});
  original.insert("name", std::string("zstd"));
  dcpp::save(original, dir.path(), zstd_save());

  const dcpp::Metadata metadata = dcpp::read_metadata(dir.path());
  for (const auto& [index, info] : metadata.storage_data) {
    INFO(index.fqn);
    REQUIRE(info.transform_descriptors == std::vector<std::string>{"stream.zstd/1"});
    const std::string stored = dcpp::test::read_file(dir / info.relative_path)
                                   .substr(static_cast<std::size_t>(info.offset), 4);
    REQUIRE(dcpp::detail::starts_with_zstd_magic(stored.data(), stored.size()));
    if (index.fqn == "zeros") REQUIRE(info.length < 256 * 256 * 4 / 50);
  }

  StateDict target;
  for (const auto& item : original) {
    if (item.value.is_tensor()) {
      target.insert(item.key, at::zeros_like(item.value.tensor()));
    } else {
      target.insert(item.key, item.value);
    }
  }
  target.insert_or_assign("step", int64_t{0});
  dcpp::load(target, dir.path());
  for (const auto& item : original) {
    INFO(item.key);
    if (item.value.is_tensor()) {
      REQUIRE(dcpp::test::bitwise_equal(target.at(item.key).tensor(), item.value.tensor()));
    }
  }
  REQUIRE(target.at("step").value().toInt() == 42);

  const StateDict loaded = dcpp::load_from_keys(dir.path());
  REQUIRE(dcpp::test::bitwise_equal(loaded.at("t_BFloat16").tensor(),
                                    original.at("t_BFloat16").tensor()));
  REQUIRE(loaded.at("name").value().toStringRef() == "zstd");

  // Resharding reads part of a compressed chunk: rows 10..19 of one, through a sharded target.
  at::Tensor part = at::zeros({10, 17}, at::kShort);
  StateDict sharded;
  sharded.insert("t_Short", dcpp::ShardedTensor({33, 17}, {dcpp::Shard{part, {10, 0}}}));
  dcpp::LoadOptions partial;
  partial.allow_partial_load = true;
  dcpp::load(sharded, dir.path(), partial);
  REQUIRE(dcpp::test::bitwise_equal(part, original.at("t_Short").tensor().narrow(0, 10, 10)));
}

TEST_CASE("zstd levels are checked, and any level reads back") {
  dcpp::test::TempDir dir;
  dcpp::SaveOptions options = zstd_save();
  options.file_system.compression_level = 0;
  REQUIRE_THROWS_WITH(dcpp::save(small_state(), dir / "a", options),
                      Catch::Contains("compression_level"));
  options.file_system.compression_level = 19;
  dcpp::save(small_state(), dir / "b", options);
  REQUIRE(dcpp::test::bitwise_equal(dcpp::load_from_keys(dir / "b").at("w").tensor(),
                                    small_state().at("w").tensor()));
}

TEST_CASE("the checksum file covers a zstd item's stored bytes") {
  dcpp::test::TempDir dir;
  dcpp::save(small_state(), dir.path(), zstd_save());
  dcpp::Metadata metadata = read_metadata_file(dir.path());
  const dcpp::StorageInfo info = storage_of(metadata, "w");
  std::string data = dcpp::test::read_file(dir / info.relative_path);
  // A byte of the frame's last block (its content checksum): the frame still decompresses.
  data[static_cast<std::size_t>(info.offset + info.length - 1)] ^= 0x01;
  dcpp::test::write_file(dir / info.relative_path, data);
  REQUIRE_THROWS_WITH(dcpp::load_from_keys(dir.path()),
                      Catch::Contains(info.relative_path) && Catch::Contains("'w'"));
  // Without the checksum file, zstd's own content checksum still finds it.
  fs::remove(dir / ".checksums");
  REQUIRE_THROWS_WITH(dcpp::load_from_keys(dir.path()), Catch::Contains(info.relative_path) &&
                                                            Catch::Contains("'w'") &&
                                                            Catch::Contains("corrupted"));
}

TEST_CASE("a hostile zstd frame is refused at the item's bound, memory bounded") {
  dcpp::test::TempDir dir;
  dcpp::save(small_state(), dir.path(), zstd_save(false));
  // 2 GiB of output from 64 KiB of frame, for a 4x4 float chunk.
  replace_item(dir.path(), "w", rle_frame(16384));
  const int64_t before = peak_rss_kib();
  const uint64_t bound = 64 + 64 * 1024 + 2 * 64;
  REQUIRE_THROWS_WITH(dcpp::load_from_keys(dir.path()),
                      Catch::Contains("'w'") && Catch::Contains("__0_0.distcp") &&
                          Catch::Contains("bound of " + std::to_string(bound) + " bytes"));
  REQUIRE(peak_rss_kib() - before < 256 * 1024);

  // A frame that declares a size past the bound is refused before decompressing.
  replace_item(dir.path(), "w", sized_frame(uint64_t{1} << 40));
  REQUIRE_THROWS_WITH(dcpp::load_from_keys(dir.path()),
                      Catch::Contains("'w'") && Catch::Contains("declares"));

  // A value has no size in .metadata: the reader's option bounds it.
  dcpp::save(small_state(), dir / "value", zstd_save(false));
  replace_item(dir / "value", "step", rle_frame(64));  // 8 MiB
  StateDict target = small_state();
  dcpp::LoadOptions options;
  options.file_system.with_max_decompressed_value_size(1 << 20);
  REQUIRE_THROWS_WITH(dcpp::load(target, dir / "value", options),
                      Catch::Contains("'step'") && Catch::Contains("bound of 1048576 bytes"));
  // Under the default bound (1 GiB), the 8 MiB is decompressed and found not to be an archive.
  REQUIRE_THROWS_WITH(dcpp::load(target, dir / "value"), Catch::Contains("'step'"));
}

TEST_CASE("truncated and garbage zstd frames are CheckpointErrors naming file and key") {
  dcpp::test::TempDir dir;
  dcpp::save(small_state(), dir.path(), zstd_save(false));
  dcpp::Metadata metadata = read_metadata_file(dir.path());
  const dcpp::StorageInfo info = storage_of(metadata, "w");
  const std::string frame =
      dcpp::test::read_file(dir / info.relative_path)
          .substr(static_cast<std::size_t>(info.offset), static_cast<std::size_t>(info.length));
  replace_item(dir.path(), "w", frame.substr(0, frame.size() / 2));
  REQUIRE_THROWS_WITH(dcpp::load_from_keys(dir.path()),
                      Catch::Contains("'w'") && Catch::Contains("truncated"));
  replace_item(dir.path(), "w", frame.substr(0, 6) + std::string(200, '\x5a'));
  REQUIRE_THROWS_WITH(dcpp::load_from_keys(dir.path()),
                      Catch::Contains("'w'") && Catch::Contains("corrupted"));
  replace_item(dir.path(), "w", "");
  REQUIRE_THROWS_WITH(dcpp::load_from_keys(dir.path()),
                      Catch::Contains("'w'") && Catch::Contains("empty"));
  // A frame of bytes that are not a torch.save archive: the archive reader says so.
  dcpp::detail::MemorySink sink;
  dcpp::detail::ZstdSink compressed(sink, 3);
  compressed.write("not an archive", 14);
  compressed.finish();
  replace_item(dir.path(), "w", sink.buffer());
  REQUIRE_THROWS_WITH(dcpp::load_from_keys(dir.path()), Catch::Contains("'w'"));
}

TEST_CASE("transform descriptors follow DCP's rules: unknown ones and versions are refused") {
  dcpp::test::TempDir dir;
  dcpp::save(small_state(), dir.path(), zstd_save(false));
  const dcpp::Metadata saved = read_metadata_file(dir.path());
  for (const std::string descriptor :
       {"stream.lz4/1", "stream.zstd/2", "stream.zstd", "stream.zstd/", "stream.zstd/10"}) {
    INFO(descriptor);
    dcpp::Metadata metadata = saved;
    storage_of(metadata, "w").transform_descriptors = {descriptor};
    write_metadata_file(dir.path(), metadata);
    REQUIRE_THROWS_WITH(dcpp::load_from_keys(dir.path()),
                        Catch::Contains("'w'") && Catch::Contains("__0_0.distcp") &&
                            Catch::Contains("'" + descriptor + "'"));
  }
  // Minor versions of 1 are 1.
  dcpp::Metadata metadata = saved;
  storage_of(metadata, "w").transform_descriptors = {"stream.zstd/1.7"};
  write_metadata_file(dir.path(), metadata);
  REQUIRE(dcpp::test::bitwise_equal(dcpp::load_from_keys(dir.path()).at("w").tensor(),
                                    small_state().at("w").tensor()));
  // A frame .metadata does not declare.
  metadata = saved;
  storage_of(metadata, "w").transform_descriptors.clear();
  write_metadata_file(dir.path(), metadata);
  REQUIRE_THROWS_WITH(dcpp::load_from_keys(dir.path()),
                      Catch::Contains("'w'") && Catch::Contains("lists no stream transform"));
}

TEST_CASE("a descriptor list naming zstd twice reads frames nested twice") {
  dcpp::test::TempDir dir;
  dcpp::save(small_state(), dir.path(), zstd_save(false));
  dcpp::Metadata metadata = read_metadata_file(dir.path());
  const dcpp::StorageInfo info = storage_of(metadata, "w");
  const std::string frame =
      dcpp::test::read_file(dir / info.relative_path)
          .substr(static_cast<std::size_t>(info.offset), static_cast<std::size_t>(info.length));
  dcpp::detail::MemorySink sink;
  dcpp::detail::ZstdSink outer(sink, 3);
  outer.write(frame.data(), frame.size());
  outer.finish();
  replace_item(dir.path(), "w", sink.buffer());
  metadata = read_metadata_file(dir.path());
  storage_of(metadata, "w").transform_descriptors = {"stream.zstd/1", "stream.zstd/1"};
  write_metadata_file(dir.path(), metadata);
  REQUIRE(dcpp::test::bitwise_equal(dcpp::load_from_keys(dir.path()).at("w").tensor(),
                                    small_state().at("w").tensor()));
}
