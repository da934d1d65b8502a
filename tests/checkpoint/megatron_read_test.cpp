// Megatron-Core wrote these checkpoints with its own dist_checkpointing.save on 2 ranks
// (tests/fixtures/megatron-core, made by ../shared/tools/megatron-ref/make_megatron_fixtures.py):
// `mcore_tp2` as current Megatron writes, `mcore_legacy_common_pt` with the older common.pt. Every
// tensor must load, resharded onto this one process, as its manifest says.

#include "dcpp_test.h"
#include "rank_threads.h"

#include <dcpp/checkpoint/checkpointer.h>
#include <dcpp/checkpoint/megatron.h>
#include <dcpp/core/checkpoint_error.h>
#include <dcpp/state_dict/python_object.h>
#include <dcpp/storage/checkpoint_layout.h>

#include "format/pickle/torch_pickle.h"

#include <nlohmann/json.hpp>

#include <fstream>

using nlohmann::json;

namespace {

namespace fs = std::filesystem;

json megatron_manifest(const std::string& name) {
  std::ifstream in(dcpp::test::megatron_fixture(name + ".manifest.json"));
  REQUIRE(in.good());
  return json::parse(in);
}

at::ScalarType dtype_named(const std::string& name) {
  if (name == "float32") return at::kFloat;
  if (name == "bfloat16") return at::kBFloat16;
  if (name == "float16") return at::kHalf;
  if (name == "int64") return at::kLong;
  FAIL("the manifest names dtype " << name);
  return at::kFloat;
}

// A copy of fixture `name` in directory `dir` whose metadata.json holds `config`.
fs::path with_config(const fs::path& dir, const std::string& name, const std::string& config) {
  fs::create_directories(dir);
  const fs::path copy = dir / name;
  fs::copy(dcpp::test::megatron_fixture(name), copy, fs::copy_options::recursive);
  fs::permissions(copy / "metadata.json", fs::perms::owner_write, fs::perm_options::add);
  std::ofstream(copy / "metadata.json", std::ios::trunc) << config;
  return copy;
}

}  // namespace

TEST_CASE("every tensor of Megatron-Core's torch_dist checkpoints loads as its manifest says") {
  for (const std::string name : {"mcore_tp2", "mcore_legacy_common_pt"}) {
    INFO(name);
    const fs::path checkpoint = dcpp::test::megatron_fixture(name);
    const json manifest = megatron_manifest(name);
    CHECK(dcpp::checkpoint_layout(checkpoint)->name() == dcpp::kMegatronLayout);

    // The metadata: Megatron's all_local_plans read as data, DCP's chunks as Megatron wrote them.
    const dcpp::Metadata metadata = dcpp::read_metadata(checkpoint);
    for (const auto& [key, expected] : manifest["dcp_metadata"]["state_dict_metadata"].items()) {
      INFO(key);
      const auto found =
          std::find_if(metadata.state_dict_metadata.begin(), metadata.state_dict_metadata.end(),
                       [&, &key = key](const auto& entry) { return entry.first == key; });
      REQUIRE(found != metadata.state_dict_metadata.end());
      if (expected["type"] != "TensorStorageMetadata") continue;
      const auto& tensor = std::get<dcpp::TensorStorageMetadata>(found->second);
      CHECK(tensor.size == expected["size"].get<std::vector<int64_t>>());
      REQUIRE(tensor.chunks.size() == expected["chunks"].size());
      for (std::size_t i = 0; i < tensor.chunks.size(); ++i) {
        CHECK(tensor.chunks[i].offsets ==
              expected["chunks"][i]["offsets"].get<std::vector<int64_t>>());
        CHECK(tensor.chunks[i].sizes == expected["chunks"][i]["sizes"].get<std::vector<int64_t>>());
      }
    }

    // Every tensor, whole, on one process: each of the 2 saving ranks' chunks lands in place.
    dcpp::StateDict state;
    for (const auto& [key, expected] : manifest["sharded_tensors"].items()) {
      state.insert(key, at::full(expected["global_shape"].get<std::vector<int64_t>>(), 7,
                                 at::TensorOptions().dtype(dtype_named(expected["dtype"]))));
    }
    const dcpp::IncompatibleKeys keys = dcpp::load(state, checkpoint);
    CHECK(keys.missing_keys.empty());
    for (const auto& [key, expected] : manifest["sharded_tensors"].items()) {
      INFO(key);
      const at::Tensor values = state.at(key).tensor().to(at::kDouble);
      CHECK(values.sum().item<double>() ==
            Approx(expected["sum"].get<double>()).epsilon(1e-9).margin(1e-9));
      CHECK((values * values).sum().item<double>() ==
            Approx(expected["sum_sq"].get<double>()).epsilon(1e-9).margin(1e-9));
      const auto first = expected["first_values"].get<std::vector<double>>();
      const at::Tensor flat = values.reshape({-1});
      for (std::size_t i = 0; i < first.size(); ++i) {
        CHECK(flat[static_cast<int64_t>(i)].item<double>() == first[i]);  // exact: same bits
      }
    }
  }
}

TEST_CASE(
    "a Megatron-Core checkpoint of another backend, or a malformed metadata.json, is refused") {
  dcpp::test::TempDir dir;
  const auto refused = [](const fs::path& checkpoint, dcpp::ErrorKind kind,
                          const std::string& message) {
    INFO(message);
    dcpp::StateDict state;
    state.insert("decoder.final_layernorm.weight", at::zeros({8}));
    try {
      dcpp::load(state, checkpoint);
      FAIL("loaded");
    } catch (const dcpp::CheckpointError& e) {
      CHECK(e.kind() == kind);
      CHECK_THAT(e.what(), Catch::Contains(message));
    }
    CHECK(state.at("decoder.final_layernorm.weight").tensor().eq(0).all().item<bool>());
  };
  refused(with_config(dir / "zarr", "mcore_tp2", R"({"sharded_backend": "zarr"})"),
          dcpp::ErrorKind::kIncompatible, "sharded backend is 'zarr'");
  refused(with_config(dir / "v2", "mcore_tp2",
                      R"({"sharded_backend": "torch_dist", "sharded_backend_version": 2})"),
          dcpp::ErrorKind::kIncompatible, "sharded_backend_version 2");
  refused(with_config(dir / "garbage", "mcore_tp2", "{\"sharded_backend\": "),
          dcpp::ErrorKind::kCorrupt, "metadata.json: not a JSON object");
  // A metadata.json that says the save committed, without the `.metadata` it wrote before it.
  const fs::path lying =
      with_config(dir / "lying", "mcore_tp2", R"({"sharded_backend": "torch_dist"})");
  fs::remove(lying / ".metadata");
  refused(lying, dcpp::ErrorKind::kNotFound,
          "no complete checkpoint at " + lying.string() + ": .metadata is missing");
}

namespace {

// The attribute `name` of the PythonObject `value` holds.
const c10::IValue& field(const c10::IValue& value, const std::string& name) {
  const dcpp::PythonObject* object = dcpp::python_object_of(value);
  REQUIRE(object != nullptr);
  const c10::IValue* attribute = object->find(name);
  REQUIRE(attribute != nullptr);
  return *attribute;
}

std::string type_name(const c10::IValue& value) {
  const dcpp::PythonObject* object = dcpp::python_object_of(value);
  return object != nullptr ? object->class_name : "";
}

// The only element of a ShardedObject's payload, `torch.save([data])`.
const dcpp::StateValue& payload(const dcpp::StateDict& state, const std::string& key) {
  const dcpp::StateValue& value = state.at(key);
  REQUIRE(value.is_list());
  REQUIRE(value.list().size() == 1);
  return value.list()[0];
}

c10::IValue dict_at(const c10::IValue& dict, const std::string& key) {
  return dict.toGenericDict().at(key);
}

// The plain value under `key` of the dict `dict`.
const c10::IValue& value_at(const dcpp::StateValue& dict, const std::string& key) {
  REQUIRE(dict.is_dict());
  const dcpp::StateValue& value = dict.dict().at(key);
  REQUIRE(value.is_value());
  return value.value();
}

}  // namespace

TEST_CASE(
    "Megatron-Core's ShardedObjects and common state read as values: numpy arrays, Namespaces") {
  const fs::path checkpoint = dcpp::test::megatron_fixture("mcore_tp2");
  const dcpp::StateDict state = dcpp::load_from_keys(
      checkpoint, {"rng_state/shard_0.1_1.2", "train_state/shard_1_2", "common_state/shard_0_1"});

  const dcpp::StateValue& train = payload(state, "train_state/shard_1_2");
  CHECK(value_at(train, "iteration").toInt() == 100);
  CHECK(value_at(train, "consumed_samples").toInt() == 3201);
  CHECK(value_at(train, "loss_scale").toDouble() == 65536.0);
  CHECK(value_at(train, "note").toStringRef() == "rank1");

  // rank 1's RNG state: Python's, numpy's (an MT19937 key as a uint32 array), torch's.
  // (Megatron's RNG state is itself a list, of one dict here.)
  const dcpp::StateValue& rng = payload(state, "rng_state/shard_0.1_1.2").list()[0];
  const auto& np_state = value_at(rng, "np_rng_state").toTupleRef().elements();
  REQUIRE(np_state.size() == 5);
  CHECK(np_state[0].toStringRef() == "MT19937");
  REQUIRE(type_name(np_state[1]) == "numpy.ndarray");
  CHECK(field(np_state[1], "dtype").toStringRef() == "<u4");
  const at::Tensor key = field(np_state[1], "array").toTensor();
  CHECK(key.scalar_type() == at::kInt);  // uint32's bits
  CHECK(key.equal(at::tensor({100, 101, 102, 103}, at::kInt)));
  const auto& random_state = value_at(rng, "random_rng_state").toTupleRef().elements();
  CHECK(random_state[0].toInt() == 3);
  CHECK(random_state[1].toTupleRef().elements()[0].toInt() == 2);
  CHECK(rng.dict().at("torch_rng_state").tensor().equal(at::arange(1, 17).to(at::kByte)));

  // The common state, with Megatron's args as an argparse.Namespace.
  const dcpp::StateValue& common = payload(state, "common_state/shard_0_1");
  const c10::IValue& args = value_at(common, "args");
  REQUIRE(type_name(args) == "argparse.Namespace");
  CHECK(field(args, "hidden_size").toInt() == 8);
  CHECK(field(args, "tensor_model_parallel_size").toInt() == 2);
  CHECK(field(args, "lr").toDouble() == 0.0003);
  CHECK(field(args, "name").toStringRef() == "tiny-gpt");
  CHECK(value_at(common, "unicode_note").toStringRef() == "h\u00e9llo \u2603");
  CHECK(value_at(common, "neg_int").toInt() == -1099511627779);
  CHECK(
      value_at(common.dict().at("content_metadata"), "distrib_optim_sharding_type").toStringRef() ==
      "fully_sharded_model_space");
}

TEST_CASE("numpy arrays and Namespaces written in Python's pickle read back the same, every byte") {
  // Bytes above 0x7f travel as latin1 code points in protocol 2: every value of a byte.
  const at::Tensor bytes = at::arange(256).to(at::kByte).reshape({16, 16});
  const at::Tensor halves = at::tensor({1.5, -2.25, 65504.0}).to(at::kHalf);
  c10::impl::GenericDict dict(c10::StringType::get(), c10::AnyType::get());
  dict.insert("bytes", dcpp::numpy_array_value(bytes, "|u1"));
  dict.insert("key", dcpp::numpy_array_value(at::tensor({-1, 7}, at::kInt), "<u4"));
  dict.insert("halves", dcpp::numpy_array_value(halves, "<f2"));
  dict.insert("args",
              dcpp::python_object_value("argparse.Namespace",
                                        {{"hidden", int64_t{8}}, {"name", std::string("tiny")}}));
  std::vector<at::Tensor> tensors;
  const std::string pickle = dcpp::detail::encode_value_pickle(dict, tensors);
  CHECK(tensors.empty());  // numpy arrays carry their bytes in the pickle
  const c10::IValue back = dcpp::detail::decode_value_pickle(
      pickle,
      [](const dcpp::detail::TensorRef&) -> at::Tensor {
        FAIL("a tensor");
        return {};
      },
      "the round trip");
  CHECK(field(dict_at(back, "bytes"), "array").toTensor().equal(bytes));
  CHECK(field(dict_at(back, "bytes"), "dtype").toStringRef() == "|u1");
  CHECK(field(dict_at(back, "key"), "array").toTensor().equal(at::tensor({-1, 7}, at::kInt)));
  CHECK(field(dict_at(back, "key"), "dtype").toStringRef() == "<u4");
  CHECK(field(dict_at(back, "halves"), "array").toTensor().equal(halves));
  CHECK(field(dict_at(back, "args"), "hidden").toInt() == 8);
  CHECK(field(dict_at(back, "args"), "name").toStringRef() == "tiny");
}

TEST_CASE("a numpy array whose dtype or bytes do not fit is refused, naming what is wrong") {
  c10::impl::GenericDict dict(c10::StringType::get(), c10::AnyType::get());
  dict.insert("key", dcpp::numpy_array_value(at::tensor({1, 2, 3, 4}, at::kInt), "<u4"));
  std::vector<at::Tensor> tensors;
  const std::string pickle = dcpp::detail::encode_value_pickle(dict, tensors);
  const auto refused = [&](const std::string& from, const std::string& to,
                           const std::string& message) {
    std::string hostile = pickle;
    const std::size_t at = hostile.find(from);
    REQUIRE(at != std::string::npos);
    REQUIRE(hostile.find(from, at + 1) == std::string::npos);  // the dtype's code, once
    hostile.replace(at, from.size(), to);
    INFO(message);
    try {
      dcpp::detail::decode_value_pickle(
          hostile, [](const dcpp::detail::TensorRef&) -> at::Tensor { return {}; }, "payload");
      FAIL("decoded");
    } catch (const dcpp::CheckpointError& e) {
      CHECK(e.kind() == dcpp::ErrorKind::kCorrupt);
      CHECK_THAT(e.what(), Catch::Contains(message));
    }
  };
  refused("u4", "u8", "payload: holds a numpy array of 4 'u8' elements in 16 bytes");
  // A dtype dcpp holds no tensor of (numpy's 'U4', 4 unicode characters) is not refused: the
  // array is kept as the calls its pickle describes, and written back as they were.
  std::string unicode = pickle;
  unicode.replace(unicode.find("u4"), 2, "U4");
  const c10::IValue kept = dcpp::detail::decode_value_pickle(
      unicode, [](const dcpp::detail::TensorRef&) -> at::Tensor { return {}; }, "payload");
  const dcpp::PythonObject* array = dcpp::python_object_of(kept.toGenericDict().at("key"));
  REQUIRE(array != nullptr);
  CHECK(array->construction == dcpp::PythonConstruction::kReduce);
  CHECK(array->name == "_reconstruct");
  REQUIRE(array->state.has_value());
  CHECK(dcpp::detail::encode_value_pickle(kept, tensors) == unicode);

  // Bytes 0 to 3 as bools: 2 and 3 are none.
  c10::impl::GenericDict bytes(c10::StringType::get(), c10::AnyType::get());
  bytes.insert("flags", dcpp::numpy_array_value(at::arange(4).to(at::kByte), "|u1"));
  std::string hostile = dcpp::detail::encode_value_pickle(bytes, tensors);
  const std::size_t code = hostile.find("u1");
  REQUIRE(code != std::string::npos);
  hostile.replace(code, 2, "b1");
  CHECK_THROWS_WITH(
      dcpp::detail::decode_value_pickle(
          hostile, [](const dcpp::detail::TensorRef&) -> at::Tensor { return {}; }, "payload"),
      Catch::Contains("payload: holds a numpy bool array with a byte other than 0 and 1"));
}

TEST_CASE(
    "load_common_state_dict reads the common state, current or legacy common.pt, and its "
    "content metadata") {
  for (const std::string name : {"mcore_tp2", "mcore_legacy_common_pt"}) {
    INFO(name);
    const json manifest = megatron_manifest(name);
    const fs::path checkpoint = dcpp::test::megatron_fixture(name);
    const dcpp::StateDict common = dcpp::megatron::load_common_state_dict(checkpoint);
    std::vector<std::string> keys;
    for (const auto& item : common) keys.push_back(item.key);
    std::sort(keys.begin(), keys.end());
    CHECK(keys == manifest["megatron_common_state_dict_keys"].get<std::vector<std::string>>());
    CHECK(common.at("iteration").value().toInt() == 100);
    CHECK(field(common.at("args").value(), "name").toStringRef() == "tiny-gpt");
    CHECK(common.at("common_tensor").tensor().equal(at::arange(6, at::kFloat).reshape({2, 3}) / 2));
    const dcpp::StateDict content = dcpp::megatron::load_content_metadata(checkpoint);
    for (const auto& [key, expected] : manifest["content_metadata"].items()) {
      INFO(key);
      const c10::IValue& value = content.at(key).value();
      if (expected.is_boolean()) {
        CHECK(value.toBool() == expected.get<bool>());
      } else if (expected.is_number_integer()) {
        CHECK(value.toInt() == expected.get<int64_t>());
      } else {
        CHECK(value.toStringRef() == expected.get<std::string>());
      }
    }
  }
  const fs::path dcp = dcpp::test::fixture("single_rank_mixed");
  REQUIRE_THROWS_WITH(
      dcpp::megatron::load_common_state_dict(dcp),
      Catch::Contains(dcp.string() + " is not a Megatron-Core checkpoint (it has no "
                                     "metadata.json); read it with load_from_keys"));
}

TEST_CASE("integrity.json: a load checks every file's SHA-256 and names the one that changed") {
  dcpp::test::TempDir dir;
  const json manifest = megatron_manifest("mcore_tp2");
  const fs::path copy = dir / "mcore_tp2";
  fs::copy(dcpp::test::megatron_fixture("mcore_tp2"), copy, fs::copy_options::recursive);
  json files = json::object();
  for (const auto& [name, file] : manifest["files"].items()) files[name] = file["sha256"];
  std::ofstream(copy / "integrity.json") << json{{"algorithm", "sha256"}, {"files", files}}.dump();

  const auto load_norm = [&] {
    dcpp::StateDict state;
    state.insert("decoder.final_layernorm.weight", at::zeros({8}));
    dcpp::load(state, copy);
    return state.at("decoder.final_layernorm.weight").tensor();
  };
  CHECK(!load_norm().eq(0).all().item<bool>());  // every digest matches: loaded

  // A byte of rank 1's data file changes: the load fails before reading anything, naming it.
  fs::permissions(copy / "__1_0.distcp", fs::perms::owner_write, fs::perm_options::add);
  {
    std::fstream file(copy / "__1_0.distcp", std::ios::in | std::ios::out | std::ios::binary);
    file.seekp(100);
    file.put('\x7f');
  }
  try {
    load_norm();
    FAIL("loaded");
  } catch (const dcpp::CheckpointError& e) {
    CHECK(e.kind() == dcpp::ErrorKind::kCorrupt);
    CHECK_THAT(e.what(), Catch::Contains((copy / "__1_0.distcp").string() +
                                         " does not match integrity.json: its SHA-256 is"));
  }

  // A name that leaves the checkpoint is refused, not read.
  std::ofstream(copy / "integrity.json", std::ios::trunc)
      << R"({"algorithm": "sha256", "files": {"../../etc/passwd": "00"}})";
  CHECK_THROWS_WITH(load_norm(), Catch::Contains("not inside the checkpoint directory"));
  std::ofstream(copy / "integrity.json", std::ios::trunc) << R"({"algorithm": "md5", "files": {}})";
  CHECK_THROWS_WITH(load_norm(), Catch::Contains("algorithm \"md5\"; dcpp checks sha256"));
}

TEST_CASE("a Megatron-Core checkpoint saved on 2 ranks loads resharded onto 3") {
  constexpr int kRanks = 3;
  const fs::path checkpoint = dcpp::test::megatron_fixture("mcore_tp2");
  const json manifest = megatron_manifest("mcore_tp2");
  // Every tensor whole, on one process: what each rank's rows must equal.
  dcpp::StateDict whole;
  for (const auto& [key, expected] : manifest["sharded_tensors"].items()) {
    whole.insert(key, at::empty(expected["global_shape"].get<std::vector<int64_t>>(),
                                at::TensorOptions().dtype(dtype_named(expected["dtype"]))));
  }
  dcpp::load(whole, checkpoint);

  std::vector<dcpp::StateDict> loaded(kRanks);
  dcpp::test::on_ranks(kRanks, "megatron-3", [&](int rank, const auto& group) {
    // Each tensor split on its first dimension into 3 near-equal row blocks (a rank may hold
    // none), as none of the 2 saving ranks cut it.
    dcpp::StateDict state;
    for (const auto& item : whole) {
      const at::Tensor& full = item.value.tensor();
      state.insert(item.key,
                   dcpp::ShardedTensor::from_chunk_of(at::zeros_like(full), 0, rank, kRanks));
    }
    dcpp::load(state, checkpoint, dcpp::LoadOptions().with_process_group(group));
    loaded[rank] = std::move(state);
  });
  for (int rank = 0; rank < kRanks; ++rank) {
    for (const auto& item : whole) {
      INFO("rank " << rank << ", " << item.key);
      const dcpp::ShardedTensor& mine = loaded[rank].at(item.key).sharded_tensor();
      const at::Tensor& full = item.value.tensor();
      for (const dcpp::Shard& shard : mine.local_shards()) {
        CHECK(dcpp::test::bitwise_equal(shard.tensor,
                                        full.narrow(0, shard.offsets[0], shard.tensor.size(0))));
      }
    }
  }
}

TEST_CASE("a DCP checkpoint with another program's metadata.json beside it is still DCP's") {
  dcpp::test::TempDir dir;
  const fs::path copy = dir / "dcp";
  fs::copy(dcpp::test::fixture("single_rank_mixed"), copy, fs::copy_options::recursive);
  std::ofstream(copy / "metadata.json") << R"({"model": "tiny", "sharded_backend_note": 1})";
  CHECK(dcpp::checkpoint_layout(copy)->name() == dcpp::kDcpLayout);
  CHECK(!dcpp::read_metadata(copy).state_dict_metadata.empty());
}
