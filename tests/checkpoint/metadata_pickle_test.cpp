// The `.metadata` pickle: PyTorch 2.6's fixtures decode to the values pickletools shows, dcpp's
// encoding round-trips every field, and hostile files fail cleanly.

#include "dcpp_test.h"

#include "format/metadata_pickle.h"
#include "format/pickle/pickle_reader.h"
#include "format/pickle/pickle_writer.h"

#include <dcpp/core/checkpoint_error.h>

#include <fstream>
#include <random>
#include <sstream>
#include <string_view>

using dcpp::CheckpointError;
using namespace dcpp;
using namespace dcpp::detail;

using dcpp::test::interop_output_dir;
using dcpp::test::read_file;
using dcpp::test::write_file;

namespace {

Metadata decode_fixture(const std::string& name) {
  const auto path = test::fixture(name) / ".metadata";
  return decode_metadata(read_file(path), path.string());
}

const StorageMetadata& item(const Metadata& m, std::string_view key) {
  for (const auto& [k, v] : m.state_dict_metadata) {
    if (k == key) return v;
  }
  FAIL("no key " << key);
  throw;
}

const TensorStorageMetadata& tensor(const Metadata& m, std::string_view key) {
  const auto* t = std::get_if<TensorStorageMetadata>(&item(m, key));
  REQUIRE(t != nullptr);
  return *t;
}

const ObjectPath& planner_path(const Metadata& m, std::string_view key) {
  for (const auto& [k, v] : m.planner_data) {
    if (k == key) return v;
  }
  FAIL("no planner_data for " << key);
  throw;
}

/// The storage entry for `fqn` at `offset` (nullopt: a bytes item).
const std::pair<MetadataIndex, StorageInfo>& storage(
    const Metadata& m, std::string_view fqn,
    const std::optional<std::vector<int64_t>>& offset = std::nullopt) {
  for (const auto& entry : m.storage_data) {
    if (entry.first.fqn == fqn && entry.first.offset == offset) return entry;
  }
  FAIL("no storage_data for " << fqn);
  throw;
}

void require_equal(const Metadata& a, const Metadata& b) {
  REQUIRE(a.state_dict_metadata.size() == b.state_dict_metadata.size());
  for (std::size_t i = 0; i < a.state_dict_metadata.size(); ++i) {
    const auto& [ka, va] = a.state_dict_metadata[i];
    const auto& [kb, vb] = b.state_dict_metadata[i];
    INFO(ka);
    REQUIRE(ka == kb);
    REQUIRE(va.index() == vb.index());
    if (const auto* ta = std::get_if<TensorStorageMetadata>(&va)) {
      const auto& tb = std::get<TensorStorageMetadata>(vb);
      CHECK(ta->properties.dtype == tb.properties.dtype);
      CHECK(ta->properties.layout == tb.properties.layout);
      CHECK(ta->properties.requires_grad == tb.properties.requires_grad);
      CHECK(ta->properties.memory_format == tb.properties.memory_format);
      CHECK(ta->properties.pin_memory == tb.properties.pin_memory);
      CHECK(ta->size == tb.size);
      CHECK((ta->chunks == tb.chunks));
    }
  }
  CHECK((a.planner_data == b.planner_data));
  REQUIRE(a.storage_data.size() == b.storage_data.size());
  for (std::size_t i = 0; i < a.storage_data.size(); ++i) {
    const auto& [ia, sa] = a.storage_data[i];
    const auto& [ib, sb] = b.storage_data[i];
    INFO(ia.fqn);
    CHECK(ia == ib);
    CHECK(ia.index == ib.index);
    CHECK(sa.relative_path == sb.relative_path);
    CHECK(sa.offset == sb.offset);
    CHECK(sa.length == sb.length);
    CHECK(sa.transform_descriptors == sb.transform_descriptors);
  }
  REQUIRE(a.storage_meta.has_value() == b.storage_meta.has_value());
  if (a.storage_meta) {
    CHECK(a.storage_meta->checkpoint_id == b.storage_meta->checkpoint_id);
    CHECK(a.storage_meta->save_id == b.storage_meta->save_id);
    CHECK(a.storage_meta->load_id == b.storage_meta->load_id);
    CHECK(a.storage_meta->modules == b.storage_meta->modules);
  }
  CHECK(a.version == b.version);
}

/// Metadata with every feature: many dtypes and layouts, sharded chunks, bytes items, int path
/// steps, transforms, storage meta, version, and 1500 extra keys (batches of 1000, memo indices
/// past 255, frames past 64 KiB).
Metadata constructed_metadata() {
  Metadata m;
  TensorStorageMetadata w;
  w.properties.dtype = at::kBFloat16;
  w.properties.requires_grad = true;
  w.properties.memory_format = MemoryFormatEncoding::kChannelsLast;
  w.properties.pin_memory = true;
  w.size = {8, 6};
  w.chunks = {{{0, 0}, {4, 6}}, {{4, 0}, {4, 6}}};
  m.state_dict_metadata.emplace_back("model.w", w);
  TensorStorageMetadata s;
  s.properties.dtype = at::kComplexHalf;
  s.properties.layout = at::kSparse;
  s.properties.memory_format = MemoryFormatEncoding::kPreserve;
  s.size = {};
  s.chunks = {{{}, {}}};
  m.state_dict_metadata.emplace_back("scalar", s);
  m.state_dict_metadata.emplace_back("optim.param_groups.0.lr", BytesStorageMetadata{});
  m.planner_data.emplace_back("model.w", ObjectPath{std::string("model"), std::string("w")});
  m.planner_data.emplace_back(
      "optim.param_groups.0.lr",
      ObjectPath{std::string("optim"), std::string("param_groups"), int64_t{0}, std::string("lr")});
  m.storage_data.push_back({MetadataIndex{"model.w", std::vector<int64_t>{0, 0}, 0},
                            StorageInfo{"__0_0.distcp", 0, 1308, {}}});
  m.storage_data.push_back({MetadataIndex{"model.w", std::vector<int64_t>{4, 0}, 1},
                            StorageInfo{"__1_0.distcp", 5000000000LL, 1308, {"stream.zstd/1"}}});
  m.storage_data.push_back({MetadataIndex{"optim.param_groups.0.lr", std::nullopt, std::nullopt},
                            StorageInfo{"__0_0.distcp", 1308, 864, {}}});
  for (int i = 0; i < 1500; ++i) {
    const std::string key = "layers." + std::to_string(i) + ".weight";
    TensorStorageMetadata t;
    t.properties.dtype = i % 2 ? at::kFloat : at::kLong;
    t.size = {i, 70000};
    t.chunks = {{{0, 0}, {i, 70000}}};
    m.state_dict_metadata.emplace_back(key, t);
    m.planner_data.emplace_back(
        key, ObjectPath{std::string("layers"), int64_t{i}, std::string("weight")});
    m.storage_data.push_back({MetadataIndex{key, std::vector<int64_t>{0, 0}, 0},
                              StorageInfo{"__0_0.distcp", int64_t{i} * 1000, int64_t{i}, {}}});
  }
  m.storage_meta = StorageMeta{std::string("/tmp/ckpt/step-1"), "save-uuid", "", {"model"}};
  m.version = "1.0.0";
  return m;
}

}  // namespace

TEST_CASE("decode_metadata reads single_rank_mixed as pickletools shows it", "[metadata]") {
  const Metadata m = decode_fixture("single_rank_mixed");
  REQUIRE(m.state_dict_metadata.size() == 18);
  CHECK(m.state_dict_metadata[0].first == "model.linear.weight");
  CHECK(m.state_dict_metadata[11].first == "step");
  CHECK(m.state_dict_metadata[17].first == "noncontig");

  const auto& w = tensor(m, "model.linear.weight");
  CHECK(w.properties.dtype == at::kFloat);
  CHECK(w.properties.layout == at::kStrided);
  CHECK_FALSE(w.properties.requires_grad);
  CHECK(w.properties.memory_format == MemoryFormatEncoding::kContiguous);
  CHECK_FALSE(w.properties.pin_memory);
  CHECK(w.size == std::vector<int64_t>{8, 4});
  REQUIRE(w.chunks.size() == 1);
  CHECK(w.chunks[0].offsets == std::vector<int64_t>{0, 0});
  CHECK(w.chunks[0].sizes == std::vector<int64_t>{8, 4});

  CHECK(tensor(m, "model.emb.weight").properties.dtype == at::kBFloat16);
  CHECK(tensor(m, "model.half").properties.dtype == at::kHalf);
  CHECK(tensor(m, "model.dbl").properties.dtype == at::kDouble);
  CHECK(tensor(m, "model.dbl").size == std::vector<int64_t>{2, 2, 2});
  CHECK(tensor(m, "model.counts").properties.dtype == at::kLong);
  CHECK(tensor(m, "model.mask").properties.dtype == at::kBool);
  CHECK(tensor(m, "model.i8").properties.dtype == at::kChar);
  CHECK(tensor(m, "model.u8").properties.dtype == at::kByte);
  CHECK(tensor(m, "model.scalar").size.empty());
  CHECK(tensor(m, "model.scalar").chunks[0].sizes.empty());
  CHECK(tensor(m, "model.empty").size == std::vector<int64_t>{0, 3});
  for (const char* key : {"step", "lr", "name", "flag", "betas", "history"}) {
    CHECK(std::holds_alternative<BytesStorageMetadata>(item(m, key)));
  }

  CHECK((planner_path(m, "model.linear.weight") ==
         ObjectPath{std::string("model"), std::string("linear.weight")}));
  CHECK((planner_path(m, "step") == ObjectPath{std::string("step")}));

  REQUIRE(m.storage_data.size() == 18);
  const auto& [step_index, step_info] = m.storage_data[0];
  CHECK(step_index.fqn == "step");
  CHECK_FALSE(step_index.offset.has_value());
  CHECK_FALSE(step_index.index.has_value());
  CHECK(step_info.relative_path == "__0_0.distcp");
  CHECK(step_info.offset == 0);
  CHECK(step_info.length == 864);
  const auto& [w_index, w_info] = storage(m, "model.linear.weight", std::vector<int64_t>{0, 0});
  CHECK(w_index.index == 0);
  CHECK(w_info.offset == 5184);
  CHECK(w_info.length == 1308);
  CHECK(w_info.transform_descriptors.empty());
  CHECK(storage(m, "model.empty", std::vector<int64_t>{0, 0}).second.length == 1116);
  CHECK(storage(m, "noncontig", std::vector<int64_t>{0, 0}).second.offset == 18612);
  CHECK(storage(m, "model.scalar", std::vector<int64_t>{}).second.offset == 16316);

  REQUIRE(m.storage_meta.has_value());
  CHECK(m.storage_meta->checkpoint_id == "out/single_rank_mixed");
  CHECK(m.storage_meta->save_id == "d619a81c-f57c-45e8-92e7-b5c850ddf00d");
  CHECK(m.storage_meta->load_id.empty());
  CHECK(m.storage_meta->modules.empty());
  CHECK_FALSE(m.version.has_value());
}

TEST_CASE("decode_metadata reads two_rank_sharded and model_optim_adam", "[metadata]") {
  const Metadata sharded = decode_fixture("two_rank_sharded");
  const auto& w = tensor(sharded, "w_row");
  CHECK(w.size == std::vector<int64_t>{8, 6});
  REQUIRE(w.chunks.size() == 2);
  CHECK(w.chunks[1].offsets == std::vector<int64_t>{4, 0});
  CHECK(w.chunks[1].sizes == std::vector<int64_t>{4, 6});
  const auto& v = tensor(sharded, "v_col");
  CHECK(v.chunks[1].offsets == std::vector<int64_t>{0, 5});
  const auto& [w1, w1_info] = storage(sharded, "w_row", std::vector<int64_t>{4, 0});
  CHECK(w1.index == 1);
  CHECK(w1_info.relative_path == "__1_0.distcp");
  CHECK(w1_info.offset == 864);
  CHECK(w1_info.length == 1244);
  CHECK(storage(sharded, "step").second.relative_path == "__1_0.distcp");
  CHECK(sharded.storage_meta->checkpoint_id == "out/two_rank_sharded");

  const Metadata adam = decode_fixture("model_optim_adam");
  CHECK((planner_path(adam, "optim.param_groups.0.lr") ==
         ObjectPath{std::string("optim"), std::string("param_groups"), int64_t{0},
                    std::string("lr")}));
  CHECK((planner_path(adam, "optim.state.0.weight.exp_avg") ==
         ObjectPath{std::string("optim"), std::string("state"), std::string("0.weight"),
                    std::string("exp_avg")}));
  CHECK(tensor(adam, "optim.state.0.weight.step").size.empty());
  CHECK(storage(adam, "optim.param_groups.0.params").second.length == 928);
  CHECK(storage(adam, "y", std::vector<int64_t>{0, 0}).second.offset == 30460);
}

TEST_CASE("encode_metadata round-trips the fixtures and every field", "[metadata]") {
  for (const char* name : {"single_rank_mixed", "two_rank_sharded", "model_optim_adam"}) {
    INFO(name);
    const Metadata m = decode_fixture(name);
    const std::string bytes = encode_metadata(m);
    // Protocol 4 with one frame, like Python's.
    REQUIRE(bytes.size() > 11);
    CHECK(static_cast<unsigned char>(bytes[0]) == 0x80);
    CHECK(bytes[1] == 4);
    CHECK(static_cast<unsigned char>(bytes[2]) == 0x95);
    require_equal(decode_metadata(bytes, name), m);
  }
  const Metadata m = constructed_metadata();
  const std::string bytes = encode_metadata(m);
  require_equal(decode_metadata(bytes, "constructed"), m);
  CHECK(encode_metadata(decode_metadata(bytes, "constructed")) == bytes);

  Metadata minimal;
  minimal.state_dict_metadata.emplace_back("x", BytesStorageMetadata{});
  require_equal(decode_metadata(encode_metadata(minimal), "minimal"), minimal);
}

TEST_CASE("storage entries given where they lie pickle as the Metadata's own", "[metadata]") {
  // The coordinator's path (encode_metadata with StorageEntryRefs, FileSystemWriter::finish):
  // the same bytes as the entries copied into storage_data, whatever the split.
  for (const char* name : {"two_rank_sharded", "model_optim_adam"}) {
    INFO(name);
    const Metadata whole = decode_fixture(name);
    const std::string expected = encode_metadata(whole);
    for (std::size_t held : {std::size_t{0}, std::size_t{1}, whole.storage_data.size()}) {
      INFO(held << " entries held in the Metadata");
      Metadata part = whole;
      part.storage_data.resize(held);
      std::vector<StorageEntryRef> rest;
      for (std::size_t i = held; i < whole.storage_data.size(); ++i) {
        rest.push_back({&whole.storage_data[i].first, &whole.storage_data[i].second});
      }
      CHECK(encode_metadata(part, rest) == expected);
    }
  }
}

TEST_CASE("decode_metadata accepts what older writers wrote", "[metadata]") {
  // Protocol 2 (GLOBAL opcodes), only state_dict_metadata, TensorProperties from the pre-2.3
  // module with MEM_FORMAT_ENCODING, torch.Size as a plain tuple, a PosixPath of parts.
  PickleWriter w(2);
  const auto open = [&](std::string_view module, std::string_view name) {
    w.put_global(module, name);
    w.empty_tuple();
    w.newobj();
  };
  open("torch.distributed.checkpoint.metadata", "Metadata");
  w.put_dict(2, [&](std::size_t i) {
    if (i == 0) {
      w.put_str("state_dict_metadata");
      w.put_dict(1, [&](std::size_t) {
        w.put_str("w");
        open("torch.distributed.checkpoint.metadata", "TensorStorageMetadata");
        w.put_dict(3, [&](std::size_t j) {
          if (j == 0) {
            w.put_str("properties");
            open("torch.distributed._shard.sharded_tensor.metadata", "TensorProperties");
            w.put_tuple(5, [&] {
              w.put_global("torch", "float16");
              w.put_global("torch.serialization", "_get_layout");
              w.put_tuple(1, [&] { w.put_str("torch.sparse_csr"); });
              w.reduce();
              w.put_bool(false);
              w.put_global("torch.distributed._shard.sharded_tensor.metadata",
                           "MEM_FORMAT_ENCODING");
              w.put_tuple(1, [&] { w.put_int(1); });
              w.reduce();
              w.put_bool(true);
            });
            w.build();
          } else if (j == 1) {
            w.put_str("size");
            w.put_tuple(1, [&] { w.put_int(3); });
          } else {
            w.put_str("chunks");
            w.put_list(0, [](std::size_t) {});
          }
        });
        w.build();
      });
    } else {
      w.put_str("storage_meta");
      open("torch.distributed.checkpoint.metadata", "StorageMeta");
      w.put_dict(1, [&](std::size_t) {
        w.put_str("checkpoint_id");
        w.put_global("pathlib", "PosixPath");
        w.put_tuple(3, [&] {
          w.put_str("/");
          w.put_str("tmp");
          w.put_str("ckpt");
        });
        w.reduce();
      });
      w.build();
    }
  });
  w.build();
  const Metadata m = decode_metadata(w.finish(), "old");
  const auto& t = tensor(m, "w");
  CHECK(t.properties.dtype == at::kHalf);
  CHECK(t.properties.layout == at::kSparseCsr);
  CHECK(t.properties.memory_format == MemoryFormatEncoding::kChannelsLast);
  CHECK(t.properties.pin_memory);
  CHECK(t.size == std::vector<int64_t>{3});
  CHECK(m.planner_data.empty());
  CHECK(m.storage_data.empty());
  REQUIRE(m.storage_meta.has_value());
  CHECK(m.storage_meta->checkpoint_id == "/tmp/ckpt");
  CHECK(m.storage_meta->save_id.empty());
}

TEST_CASE("decode_metadata refuses hostile and malformed files", "[metadata][hostile]") {
  const std::string fixture_bytes = read_file(test::fixture("two_rank_sharded") / ".metadata");
  for (std::size_t n = 0; n < fixture_bytes.size(); ++n) {
    INFO("prefix of " << n << " bytes");
    REQUIRE_THROWS_AS(decode_metadata(fixture_bytes.substr(0, n), "cut"), CheckpointError);
  }

  // A dtype the fixture writer could have used but libtorch lacks, and a made-up one.
  std::string unsupported = fixture_bytes;
  const std::string float32 = std::string("\x8c\x07", 2) + "float32";
  const std::size_t at = unsupported.find(float32);
  REQUIRE(at != std::string::npos);
  unsupported.replace(at, float32.size(), std::string("\x8c\x07", 2) + "float8x");
  REQUIRE_THROWS_WITH(decode_metadata(unsupported, "ckpt/.metadata"),
                      Catch::Contains("torch.float8x") && Catch::Contains("ckpt/.metadata"));
  Metadata m;
  TensorStorageMetadata t;
  t.properties.dtype = at::kFloat;
  m.state_dict_metadata.emplace_back("x", t);
  std::string bytes = encode_metadata(m);
  const std::string name = std::string("\x8c\x07", 2) + "float32";
  bytes.replace(bytes.find(name), name.size(), std::string("\x8c\x0b", 2) + "float8_e5m2");
  // (The frame header now undercounts by 4 bytes: frames are only read-ahead hints.)
#ifdef DCPP_HAS_FLOAT8
  REQUIRE(std::get<TensorStorageMetadata>(
              decode_metadata(bytes, "ckpt/.metadata").state_dict_metadata[0].second)
              .properties.dtype == at::ScalarType::Float8_e5m2);
#else
  REQUIRE_THROWS_WITH(decode_metadata(bytes, "ckpt/.metadata"),
                      Catch::Contains("torch.float8_e5m2") && Catch::Contains("'x'"));
#endif

  // A foreign global anywhere is refused before anything else.
  std::string foreign = fixture_bytes;
  const std::string path_class = std::string("\x8c\x09", 2) + "PosixPath";
  foreign.replace(foreign.find(path_class), path_class.size(),
                  std::string("\x8c\x09", 2) + "PosixPatx");
  REQUIRE_THROWS_WITH(
      decode_metadata(foreign, "ckpt/.metadata"),
      Catch::Contains("pathlib._local.PosixPatx") && Catch::Contains("which dcpp does not load"));

  // Structurally wrong files.
  PickleWriter not_metadata(4);
  not_metadata.put_dict(0, [](std::size_t) {});
  REQUIRE_THROWS_WITH(decode_metadata(not_metadata.finish(), "f"),
                      Catch::Contains("f: ") && Catch::Contains("not a Metadata"));
  PickleWriter no_sdm(4);
  no_sdm.put_global("torch.distributed.checkpoint.metadata", "Metadata");
  no_sdm.empty_tuple();
  no_sdm.newobj();
  no_sdm.put_dict(1, [&](std::size_t) {
    no_sdm.put_str("state_dict_metadata");
    no_sdm.put_list(0, [](std::size_t) {});
  });
  no_sdm.build();
  REQUIRE_THROWS_WITH(decode_metadata(no_sdm.finish(), "f"),
                      Catch::Contains("state_dict_metadata is a list"));
}

TEST_CASE("random corruption of .metadata never crashes decode_metadata", "[metadata][hostile]") {
  const std::string seed = read_file(test::fixture("two_rank_sharded") / ".metadata");
  std::mt19937 rng(99);
  int decoded = 0;
  for (int iteration = 0; iteration < 5000; ++iteration) {
    std::string bytes = seed;
    for (int e = 1 + static_cast<int>(rng() % 3); e > 0; --e) {
      const std::size_t at = rng() % bytes.size();
      if (rng() % 2) {
        bytes[at] = static_cast<char>(rng());
      } else {
        bytes.erase(at, 1 + rng() % 4);
      }
    }
    try {
      decode_metadata(bytes, "fuzz");
      ++decoded;
    } catch (const CheckpointError&) {
    }
  }
  CHECK(decoded < 5000);
}

TEST_CASE("decode_metadata bounds what shared strings expand to", "[metadata][hostile]") {
  // 3000 storage_data entries whose fqn is one memoized 200 KB string: 600 MB if copied.
  PickleWriter w(4);
  const std::string huge(200000, 'k');
  w.put_global("torch.distributed.checkpoint.metadata", "Metadata");
  w.empty_tuple();
  w.newobj();
  w.put_dict(2, [&](std::size_t i) {
    if (i == 0) {
      w.put_shared_str("state_dict_metadata");
      w.put_dict(0, [](std::size_t) {});
      return;
    }
    w.put_shared_str("storage_data");
    w.put_dict(3000, [&](std::size_t j) {
      w.put_global("torch.distributed.checkpoint.metadata", "MetadataIndex");
      w.empty_tuple();
      w.newobj();
      w.put_dict(2, [&](std::size_t k) {
        w.put_shared_str(k == 0 ? "fqn" : "offset");
        if (k == 0) {
          w.put_shared_str(huge);
        } else {
          w.put_tuple(1, [&] { w.put_int(static_cast<int64_t>(j)); });  // distinct keys
        }
      });
      w.build();
      w.put_global("torch.distributed.checkpoint.filesystem", "_StorageInfo");
      w.empty_tuple();
      w.newobj();
      w.put_dict(3, [&](std::size_t k) {
        w.put_shared_str(k == 0 ? "relative_path" : k == 1 ? "offset" : "length");
        if (k == 0) {
          w.put_shared_str("__0_0.distcp");
        } else {
          w.put_int(0);
        }
      });
      w.build();
    });
  });
  w.build();
  const std::string bytes = w.finish();
  CHECK(bytes.size() < 400000);
  REQUIRE_THROWS_WITH(decode_metadata(bytes, "f"), Catch::Contains("expands"));
}

TEST_CASE("decode_metadata accepts a long real list, whose entries pay for its slots",
          "[metadata][hostile]") {
  // A list is charged per slot (hostile_input_test.cpp); a real one of 200,000 values, three
  // times what the budget's fixed part covers, must still decode: each item's entries in
  // state_dict_metadata, planner_data and storage_data buy more than its slot costs.
  Metadata m;
  constexpr int64_t kItems = 200000;
  for (int64_t i = 0; i < kItems; ++i) {
    const std::string key = "history." + std::to_string(i);
    m.state_dict_metadata.emplace_back(key, BytesStorageMetadata{});
    m.planner_data.emplace_back(key, ObjectPath{std::string("history"), i});
    m.storage_data.push_back({MetadataIndex{key, std::nullopt, std::nullopt},
                              StorageInfo{"__0_0.distcp", i * 800, 800, {}}});
  }
  const Metadata decoded = decode_metadata(encode_metadata(m), "ckpt/.metadata");
  REQUIRE(decoded.planner_data.size() == static_cast<std::size_t>(kItems));
  CHECK((decoded.planner_data.back() == m.planner_data.back()));
}

TEST_CASE("write .metadata files for the Python interop check", "[.interop]") {
  const auto dir = dcpp::test::interop_output_dir("pickle-interop");
  std::filesystem::create_directories(dir);
  for (const char* name : {"single_rank_mixed", "two_rank_sharded", "model_optim_adam"}) {
    std::ofstream(dir / (std::string(name) + ".metadata"), std::ios::binary)
        << encode_metadata(decode_fixture(name));
  }
  std::ofstream(dir / "constructed.metadata", std::ios::binary)
      << encode_metadata(constructed_metadata());
}

TEST_CASE("storage entries in any order of keys and files pickle their FQNs and files right",
          "[metadata]") {
  // The encoder fetches an entry's FQN and file from the memo by guessing the key after the
  // last entry's and the last entry's file: every miss and hit must name the right string.
  Metadata m;
  for (const char* key : {"a", "b", "c", "d"}) {
    TensorStorageMetadata tensor;
    tensor.size = {32};
    for (int64_t r = 0; r < 16; ++r) tensor.chunks.push_back({{2 * r}, {2}});
    m.state_dict_metadata.emplace_back(key, tensor);
  }
  m.state_dict_metadata.emplace_back("e", BytesStorageMetadata{});
  // Keys in order, skipping, backwards, repeated, starting over, and one no key names; files
  // alternating, repeated and shared.
  const std::vector<std::pair<std::string, std::string>> entries{
      {"a", "f0"}, {"b", "f0"}, {"d", "f1"}, {"c", "f1"}, {"c", "f0"}, {"a", "f2"},
      {"b", "f2"}, {"x", "f2"}, {"a", "f0"}, {"e", "f0"}, {"d", "f3"}, {"b", "f0"}};
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const auto& [key, file] = entries[i];
    std::optional<std::vector<int64_t>> offset;
    if (key != "e" && key != "x") offset = std::vector<int64_t>{static_cast<int64_t>(i) * 2};
    m.storage_data.emplace_back(MetadataIndex{key, offset, std::nullopt},
                                StorageInfo{file, static_cast<int64_t>(i) * 64, 64, {}});
  }
  const Metadata decoded = decode_metadata(encode_metadata(m), "any order");
  REQUIRE(decoded.storage_data.size() == entries.size());
  for (std::size_t i = 0; i < entries.size(); ++i) {
    INFO("entry " << i);
    CHECK(decoded.storage_data[i].first.fqn == entries[i].first);
    CHECK(decoded.storage_data[i].second.relative_path == entries[i].second);
    CHECK(decoded.storage_data[i].first.offset == m.storage_data[i].first.offset);
  }
}
