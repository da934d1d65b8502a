// dcpp writing Megatron-Core's `torch_dist` layout (megatron_storage.h, megatron.h): what it
// writes must be what Megatron writes (metadata.json byte for byte, the common state and
// ShardedObjects as `torch.save([data])` items) and read back, by dcpp, bit for bit. Megatron's
// own load of it is checked by hand (docs/megatron.md, "Checked with Megatron-Core's own load").

#include "dcpp_test.h"
#include "rank_threads.h"

#include <dcpp/checkpoint/checkpointer.h>
#include <dcpp/checkpoint/megatron.h>
#include <dcpp/core/checkpoint_error.h>
#include <dcpp/state_dict/python_object.h>
#include <dcpp/state_dict/whole_value.h>
#include <dcpp/storage/checkpoint_layout.h>
#include <dcpp/storage/megatron_storage.h>

#include "format/byte_io.h"
#include "format/zip/zip_blob_reader.h"

#include <nlohmann/json.hpp>

#include <cstring>
#include <fstream>
#include <map>

namespace {

namespace fs = std::filesystem;

c10::IValue generic_dict(std::vector<std::pair<std::string, c10::IValue>> entries) {
  c10::impl::GenericDict dict(c10::StringType::get(), c10::AnyType::get());
  for (auto& [key, value] : entries) dict.insert(key, std::move(value));
  return dict;
}

// What a Megatron-LM job keeps outside its tensors: the iteration, its args, a scheduler.
dcpp::StateDict common_state() {
  dcpp::StateDict common;
  common.insert("iteration", 100);
  common.insert("args", dcpp::python_object_value(
                            dcpp::kNamespaceClass,
                            {{"hidden_size", int64_t{8}}, {"lr", 3e-4}, {"name", "tiny-gpt"}}));
  dcpp::StateDict scheduler;
  scheduler.insert("num_steps", 3200);
  scheduler.insert("decay_style", "cosine");
  common.insert("opt_param_scheduler", std::move(scheduler));
  common.insert("common_tensor", at::arange(6, at::kFloat).reshape({2, 3}));
  return common;
}

// One rank's RNG state, as Megatron's ShardedObject "rng_state" holds it.
c10::IValue rng_state(int rank) {
  const at::Tensor key = at::arange(4, at::kInt) + 100 + rank;
  return generic_dict(
      {{"torch_rng_state", at::arange(1, 17).to(at::kByte) + rank},
       {"np_rng_state", c10::ivalue::Tuple::create({"MT19937", dcpp::numpy_array_value(key, "<u4"),
                                                    int64_t{0}, int64_t{0}, 0.0})}});
}

dcpp::StateDict megatron_state() {
  dcpp::StateDict state;
  state.insert("embedding.word_embeddings.weight", at::randn({16, 8}));
  state.insert("decoder.layers.self_attention.linear_qkv.weight",  // layer-stacked
               at::randn({2, 24, 8}).to(at::kBFloat16));
  state.insert("embedding.token_counts", at::randint(-(int64_t{1} << 40), int64_t{1} << 40, {16},
                                                     at::TensorOptions().dtype(at::kLong)));
  dcpp::megatron::add_sharded_object(state, "rng_state", rng_state(0), {0, 0}, {1, 1});
  dcpp::StateDict content;
  content.insert("format_version", 1);
  dcpp::megatron::add_common_state(state, common_state(), content);
  return state;
}

std::vector<std::string> files_in(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) {
    names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace

TEST_CASE("Megatron-Core's ShardedObject keys are its unique keys") {
  CHECK(dcpp::megatron::sharded_object_key("rng_state", {0, 1}, {1, 2}) ==
        "rng_state/shard_0.1_1.2");
  CHECK(dcpp::megatron::sharded_object_key("common_state", {0}, {1}) == "common_state/shard_0_1");
  CHECK_THROWS_WITH(dcpp::megatron::sharded_object_key("x", {2}, {2}),
                    Catch::Contains("offset (2) of shape (2) of ShardedObject 'x'"));
  CHECK_THROWS_WITH(dcpp::megatron::sharded_object_key("x", {0}, {1, 1}),
                    Catch::Contains("one offset per dimension"));
  dcpp::StateDict state;
  dcpp::megatron::add_sharded_object(state, "train_state", 1, {0}, {2});
  CHECK_THROWS_WITH(dcpp::megatron::add_sharded_object(state, "train_state", 2, {0}, {2}),
                    Catch::Contains("train_state/shard_0_2"));
}

TEST_CASE("a state dict saved in Megatron-Core's layout is Megatron's and reads back bit for bit") {
  dcpp::test::TempDir dir;
  const fs::path ckpt = dir / "iter_0000100";
  const dcpp::StateDict saved = megatron_state();
  dcpp::save(saved, dcpp::Location(ckpt).with_layout(dcpp::kMegatronLayout));

  // Megatron's commit, byte for byte as its own save wrote it into the fixture, beside DCP's files.
  CHECK(dcpp::test::read_file(ckpt / "metadata.json") ==
        dcpp::test::read_file(dcpp::test::megatron_fixture("mcore_tp2") / "metadata.json"));
  CHECK(files_in(ckpt) ==
        std::vector<std::string>{".checksums", ".metadata", "__0_0.distcp", "metadata.json"});
  CHECK(dcpp::checkpoint_layout(ckpt)->name() == dcpp::kMegatronLayout);

  // Every tensor bit for bit.
  dcpp::StateDict tensors;
  for (const auto& item : saved) {
    if (item.value.is_tensor()) tensors.insert(item.key, at::zeros_like(item.value.tensor()));
  }
  dcpp::load(tensors, ckpt);
  REQUIRE(tensors.size() == 3);
  for (const auto& item : tensors) {
    INFO(item.key);
    CHECK(dcpp::test::bitwise_equal(item.value.tensor(), saved.at(item.key).tensor()));
  }

  // The common state and its content metadata, as Megatron's load_common_state_dict reads them.
  const dcpp::StateDict common = dcpp::megatron::load_common_state_dict(ckpt);
  const dcpp::StateDict expected = common_state();
  for (const auto& item : expected) {
    INFO(item.key);
    REQUIRE(common.contains(item.key));
  }
  CHECK(common.at("iteration").value().toInt() == 100);
  CHECK(dcpp::python_object_of(common.at("args").value())->find("name")->toStringRef() ==
        "tiny-gpt");
  CHECK(common.at("opt_param_scheduler").dict().at("decay_style").value().toStringRef() ==
        "cosine");
  CHECK(dcpp::test::bitwise_equal(common.at("common_tensor").tensor(),
                                  expected.at("common_tensor").tensor()));
  CHECK(dcpp::megatron::load_content_metadata(ckpt).at("format_version").value().toInt() == 1);

  // The ShardedObject: `[data]`, read into a whole value it stays one, equal to what was saved.
  dcpp::StateDict objects;
  objects.insert("rng_state/shard_0.0_1.1", dcpp::whole_value(c10::IValue()));
  dcpp::load(objects, ckpt);
  const c10::IValue& loaded = objects.at("rng_state/shard_0.0_1.1").value();
  REQUIRE(dcpp::whole_value_of(loaded) != nullptr);
  CHECK(dcpp::test::same_value(loaded, saved.at("rng_state/shard_0.0_1.1").value()));
}

TEST_CASE("what a program loads from Megatron's own checkpoint it saves back unchanged") {
  // Megatron-Core's fixture, every tensor and value read, saved in its layout, read again.
  const fs::path fixture = dcpp::test::megatron_fixture("mcore_tp2");
  const dcpp::Metadata metadata = dcpp::read_metadata(fixture);
  dcpp::StateDict state;
  for (const auto& [key, entry] : metadata.state_dict_metadata) {
    if (const auto* tensor = std::get_if<dcpp::TensorStorageMetadata>(&entry)) {
      state.insert(key,
                   at::empty(tensor->size, at::TensorOptions().dtype(tensor->properties.dtype)));
    } else {
      state.insert(key, dcpp::whole_value(c10::IValue()));
    }
  }
  dcpp::load(state, fixture);
  dcpp::test::TempDir dir;
  dcpp::save(state, *dcpp::make_megatron_writer(dir / "again"));
  dcpp::StateDict again = dcpp::test::zeros_like(state);
  for (auto& item : again) {
    if (!item.value.is_tensor()) item.value = dcpp::whole_value(c10::IValue());
  }
  dcpp::load(again, dir / "again");
  for (const auto& item : state) {
    INFO(item.key);
    if (item.value.is_tensor()) {
      CHECK(dcpp::test::bitwise_equal(again.at(item.key).tensor(), item.value.tensor()));
    } else {
      CHECK(dcpp::test::same_value(again.at(item.key).value(), item.value.value()));
    }
  }
  CHECK(dcpp::megatron::load_common_state_dict(dir / "again").at("iteration").value().toInt() ==
        100);
}

namespace {

// The `data.pkl` of every value item of the checkpoint in `dir`, by key.
std::map<std::string, std::string> value_pickles(const fs::path& dir) {
  std::map<std::string, std::string> pickles;
  for (const auto& [index, info] : dcpp::read_metadata(dir).storage_data) {
    if (index.offset) continue;  // a tensor's chunk
    const std::string file = dcpp::test::read_file(dir / info.relative_path);
    const std::string item = file.substr(info.offset, info.length);
    const dcpp::detail::MemorySource source(item, index.fqn);
    const dcpp::detail::ZipBlobReader zip(source);
    pickles[index.fqn] = zip.read_string(zip.get("data.pkl"), /*verify_crc=*/true);
  }
  return pickles;
}

}  // namespace

TEST_CASE("the common state and ShardedObjects saved back are Megatron's pickles, byte for byte") {
  // Megatron's fixture, read and saved back: each value item's pickle is the one Megatron's
  // torch.save wrote, but for the module numpy arrays are rebuilt from. dcpp names numpy 1's
  // `numpy.core.multiarray`, which numpy 1 and 2 both read; numpy 2 writes `numpy._core`.
  const fs::path fixture = dcpp::test::megatron_fixture("mcore_tp2");
  dcpp::StateDict values;
  for (const auto& [key, entry] : dcpp::read_metadata(fixture).state_dict_metadata) {
    if (std::holds_alternative<dcpp::BytesStorageMetadata>(entry)) {
      values.insert(key, dcpp::whole_value(c10::IValue()));
    }
  }
  dcpp::load(values, fixture);
  dcpp::test::TempDir dir;
  dcpp::save(values, *dcpp::make_megatron_writer(dir / "again"));

  std::map<std::string, std::string> expected = value_pickles(fixture);
  const std::map<std::string, std::string> written = value_pickles(dir / "again");
  REQUIRE(expected.size() == 9);
  CHECK(written.size() == expected.size());
  for (auto& [key, pickle] : expected) {
    INFO(key);
    for (std::size_t at = pickle.find("numpy._core"); at != std::string::npos;
         at = pickle.find("numpy._core", at)) {
      pickle.replace(at, std::strlen("numpy._core"), "numpy.core");
    }
    REQUIRE(written.count(key) == 1);
    CHECK(written.at(key) == pickle);
  }
}

TEST_CASE("a Megatron-Core save without its common state is refused before anything is written") {
  dcpp::test::TempDir dir;
  dcpp::StateDict state;
  state.insert("w", at::ones({4}));
  const dcpp::CheckpointError error =
      dcpp::test::error_of([&] { dcpp::save(state, *dcpp::make_megatron_writer(dir / "ckpt")); });
  CHECK(error.kind() == dcpp::ErrorKind::kUsage);
  CHECK_THAT(error.what(), Catch::Contains("has no 'common_state/shard_0_1'"));
  CHECK_THAT(error.what(), Catch::Contains("dcpp::megatron::add_common_state"));
  CHECK_FALSE(fs::exists(dir / "ckpt" / ".metadata"));
  CHECK_FALSE(fs::exists(dir / "ckpt" / "metadata.json"));

  // Nor without collectives: one metadata.json commits every rank's files.
  dcpp::megatron::add_common_state(state, {});
  const dcpp::CheckpointError alone = dcpp::test::error_of([&] {
    dcpp::save(state, *dcpp::make_megatron_writer(dir / "alone"),
               dcpp::SaveOptions().with_use_collectives(false).with_rank(0));
  });
  CHECK(alone.kind() == dcpp::ErrorKind::kUsage);
  CHECK_THAT(alone.what(), Catch::Contains("save it with collectives"));
  CHECK_FALSE(fs::exists(dir / "alone" / "metadata.json"));

  // A location that is not a directory.
  CHECK_THROWS_WITH(
      dcpp::save(state, dcpp::Location("s3://bucket/ckpt").with_layout(dcpp::kMegatronLayout)),
      Catch::Contains("writes Megatron-Core checkpoints to a directory only"));
  // A layout dcpp reads but does not write.
  CHECK_THROWS_WITH(
      dcpp::save(state, dcpp::Location(dir / "hf").with_layout(dcpp::kHuggingFaceLayout)),
      Catch::Contains("dcpp reads the layout 'huggingface' but does not write it"));
}

TEST_CASE("integrity.json as Megatron writes it: every file's SHA-256, checked by the next load") {
  dcpp::test::TempDir dir;
  const fs::path ckpt = dir / "ckpt";
  const dcpp::StateDict saved = megatron_state();
  dcpp::save(saved, *dcpp::make_megatron_writer(
                        ckpt, dcpp::MegatronWriterOptions().with_integrity_file(true)));
  const std::string text = dcpp::test::read_file(ckpt / "integrity.json");
  const nlohmann::json integrity = nlohmann::json::parse(text);
  CHECK(integrity["algorithm"] == "sha256");
  std::vector<std::string> listed;
  for (const auto& [name, digest] : integrity["files"].items()) {
    listed.push_back(name);
    CHECK(digest.get<std::string>().size() == 64);
  }
  CHECK(listed ==
        std::vector<std::string>{".checksums", ".metadata", "__0_0.distcp", "metadata.json"});
  // Python's json.dump(payload, f, indent=2), as Megatron's save_integrity_manifest writes it.
  std::string python = "{\n  \"algorithm\": \"sha256\",\n  \"files\": {";
  for (std::size_t i = 0; i < listed.size(); ++i) {
    python += std::string(i == 0 ? "" : ",") + "\n    \"" + listed[i] + "\": \"" +
              integrity["files"][listed[i]].get<std::string>() + "\"";
  }
  python += "\n  }\n}";
  CHECK(text == python);

  // A changed byte of the data file: the next load names it.
  {
    std::fstream file(ckpt / "__0_0.distcp", std::ios::in | std::ios::out | std::ios::binary);
    file.seekp(64);
    file.put('\x5a');
  }
  dcpp::StateDict state;
  state.insert("embedding.word_embeddings.weight", at::zeros({16, 8}));
  CHECK_THROWS_WITH(dcpp::load(state, ckpt),
                    Catch::Contains("__0_0.distcp does not match integrity.json"));

  // A save that replaces the checkpoint without one takes the stale one away.
  dcpp::save(saved, *dcpp::make_megatron_writer(
                        ckpt, dcpp::MegatronWriterOptions().with_file_system(
                                  dcpp::FileSystemWriterOptions().with_overwrite(true))));
  CHECK_FALSE(fs::exists(ckpt / "integrity.json"));
  dcpp::load(state, ckpt);
  CHECK(dcpp::test::bitwise_equal(state.at("embedding.word_embeddings.weight").tensor(),
                                  saved.at("embedding.word_embeddings.weight").tensor()));
}

TEST_CASE("a Megatron-Core checkpoint saved by 2 ranks, each its shards, loads on 1 and on 3") {
  dcpp::test::TempDir dir;
  const fs::path ckpt = dir / "ckpt";
  const at::Tensor weight = at::randn({6, 4});
  dcpp::test::on_ranks(2, "megatron-save-2", [&](int rank, const auto& group) {
    dcpp::StateDict state;
    state.insert("decoder.weight", dcpp::ShardedTensor::from_chunk_of(weight, 0, rank, 2));
    dcpp::megatron::add_sharded_object(state, "rng_state", rng_state(rank), {0, rank}, {1, 2});
    if (rank == 0) dcpp::megatron::add_common_state(state, common_state());
    dcpp::save(state, dcpp::Location(ckpt).with_layout(dcpp::kMegatronLayout),
               dcpp::SaveOptions().with_process_group(group));
  });
  CHECK(fs::exists(ckpt / "metadata.json"));

  dcpp::StateDict whole;
  whole.insert("decoder.weight", at::zeros({6, 4}));
  whole.insert("rng_state/shard_0.1_1.2", dcpp::whole_value(c10::IValue()));
  dcpp::load(whole, ckpt);
  CHECK(dcpp::test::bitwise_equal(whole.at("decoder.weight").tensor(), weight));
  c10::impl::GenericList payload(c10::AnyType::get());
  payload.push_back(rng_state(1));
  CHECK(dcpp::test::same_value(whole.at("rng_state/shard_0.1_1.2").value(), payload));

  std::vector<at::Tensor> rows(3);
  dcpp::test::on_ranks(3, "megatron-load-3", [&](int rank, const auto& group) {
    dcpp::StateDict state;
    state.insert("decoder.weight",
                 dcpp::ShardedTensor::from_chunk_of(at::zeros({6, 4}), 0, rank, 3));
    dcpp::load(state, ckpt, dcpp::LoadOptions().with_process_group(group));
    rows[rank] = state.at("decoder.weight").sharded_tensor().local_shards().at(0).tensor;
  });
  CHECK(dcpp::test::bitwise_equal(at::cat(rows), weight));
}

TEST_CASE("a common state every rank adds is saved once; ranks that disagree fail the save") {
  // Megatron's save takes the common state on every rank and writes rank 0's (validate_access_
  // integrity warns when the others differ). Given on every rank, dcpp saves it once, and ranks
  // whose common states differ fail the save on every rank (the replica check), naming the key.
  dcpp::test::TempDir dir;
  std::vector<std::string> errors(2);
  for (const bool agree : {true, false}) {
    dcpp::test::on_ranks(
        2, agree ? "megatron-common-agree" : "megatron-common-differ",
        [&](int rank, const auto& group) {
          dcpp::StateDict state;
          state.insert("w", dcpp::ShardedTensor::from_chunk_of(at::ones({4, 2}), 0, rank, 2));
          dcpp::StateDict common;
          common.insert("iteration", agree ? 100 : 100 + rank);
          dcpp::megatron::add_common_state(state, std::move(common));
          try {
            dcpp::save(state,
                       dcpp::Location(dir / (agree ? "same" : "differ"))
                           .with_layout(dcpp::kMegatronLayout),
                       dcpp::SaveOptions().with_process_group(group));
          } catch (const dcpp::CheckpointError& e) {
            errors[rank] = e.what();
          }
        });
  }
  CHECK(dcpp::megatron::load_common_state_dict(dir / "same").at("iteration").value().toInt() ==
        100);
  for (const std::string& error : errors) {
    CHECK_THAT(error, Catch::Contains("common_state/shard_0_1"));
  }
  CHECK_FALSE(fs::exists(dir / "differ" / "metadata.json"));
}

TEST_CASE("Megatron's validate_access_integrity: values are ShardedObjects, each a whole grid") {
  dcpp::test::TempDir dir;
  const auto refused = [&](const dcpp::StateDict& state, const std::string& message) {
    INFO(message);
    const dcpp::CheckpointError error =
        dcpp::test::error_of([&] { dcpp::save(state, *dcpp::make_megatron_writer(dir / "x")); });
    CHECK(error.kind() == dcpp::ErrorKind::kUsage);
    CHECK_THAT(error.what(), Catch::Contains(message));
    CHECK_FALSE(fs::exists(dir / "x" / ".metadata"));
    // Megatron's validate_access_integrity=False: saved as it is.
    const fs::path unchecked = dir / ("unchecked-" + std::to_string(message.size()));
    dcpp::save(state,
               *dcpp::make_megatron_writer(
                   unchecked, dcpp::MegatronWriterOptions().with_validate_access_integrity(false)));
    CHECK(fs::exists(unchecked / "metadata.json"));
  };
  dcpp::StateDict plain_value;
  plain_value.insert("step", 5);
  dcpp::megatron::add_common_state(plain_value, {});
  refused(plain_value,
          "the value 'step' is neither in Megatron's common state nor a "
          "ShardedObject shard");

  dcpp::StateDict half_grid;
  dcpp::megatron::add_sharded_object(half_grid, "rng_state", rng_state(0), {0, 0}, {1, 2});
  dcpp::megatron::add_common_state(half_grid, {});
  refused(half_grid,
          "no rank has the shard at (0, 1) of ShardedObject 'rng_state', of shape "
          "(1, 2)");
}
