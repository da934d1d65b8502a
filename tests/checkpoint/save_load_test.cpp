#include "dcpp_test.h"

#include <dcpp/checkpoint/checkpointer.h>
#include <dcpp/core/checkpoint_error.h>
#include <dcpp/state_dict/model_state_dict.h>
#include <dcpp/state_dict/stateful.h>

#include <fstream>
#include <optional>

using dcpp::ShardedTensor;
using dcpp::StateDict;
using dcpp::StateList;
namespace fs = std::filesystem;

namespace {

dcpp::SaveOptions quick_save() {
  dcpp::SaveOptions options;
  options.file_system.sync_files = false;
  return options;
}

at::Tensor random_of(at::ScalarType dtype, at::IntArrayRef shape) {
  if (dtype == at::kBool) {
    return at::rand(shape) > 0.5;
  }
  if (at::isIntegralType(dtype, /*includeBool=*/false)) {
    return at::randint(-100, 100, shape)
        .to(dtype == at::kByte ? at::kShort : at::kLong)
        .abs()
        .to(dtype);
  }
  return at::randn(shape, at::TensorOptions().dtype(dtype));
}

StateDict zeros_like_tree(const StateDict& source) {
  StateDict out;
  for (const auto& item : source) {
    if (item.value.is_tensor()) {
      out.insert(item.key, at::zeros_like(item.value.tensor()));
    } else if (item.value.is_dict()) {
      out.insert(item.key, zeros_like_tree(item.value.dict()));
    } else {
      out.insert(item.key, item.value);
    }
  }
  return out;
}

// Saves `original`, loads it into zeroed tensors of the same shapes, and checks every tensor.
void require_round_trip(const StateDict& original) {
  dcpp::test::TempDir dir;
  dcpp::save(original, dir.path(), quick_save());
  StateDict loaded = zeros_like_tree(original);
  dcpp::load(loaded, dir.path());
  for (const auto& item : original) {
    INFO(item.key);
    REQUIRE(dcpp::test::bitwise_equal(loaded.at(item.key).tensor(), item.value.tensor()));
  }
}

}  // namespace

TEST_CASE("every dtype round-trips bit for bit") {
  StateDict original;
  for (at::ScalarType dtype :
       {at::kFloat, at::kDouble, at::kHalf, at::kBFloat16, at::kComplexFloat, at::kComplexDouble,
        at::kByte, at::kChar, at::kShort, at::kInt, at::kLong, at::kBool}) {
    original.insert(c10::toString(dtype), random_of(dtype, {7, 5}));
  }
  original.insert("nan_and_inf", at::tensor({NAN, INFINITY, -INFINITY, -0.0f}));
  require_round_trip(original);
}

TEST_CASE("non-contiguous, offset, empty and scalar tensors round-trip") {
  dcpp::test::TempDir dir;
  const at::Tensor base = at::randn({6, 8});
  StateDict original;
  original.insert("transposed", base.t());                // written with its strides
  original.insert("column_slice", base.narrow(1, 2, 3));  // a view: written compactly
  original.insert("offset_view", base[3]);
  original.insert("expanded", at::randn({1, 4}).expand({3, 4}));
  original.insert("empty", at::zeros({0, 3}));
  original.insert("scalar", at::scalar_tensor(2.5));
  require_round_trip(original);

  // Loading into a non-contiguous destination writes through the view.
  dcpp::save(original, dir.path(), quick_save());
  StateDict strided;
  at::Tensor storage = at::zeros({6, 8});
  strided.insert("transposed", storage.t());
  dcpp::LoadOptions partial;
  partial.allow_partial_load = true;
  dcpp::load(strided, dir.path(), partial);
  REQUIRE(dcpp::test::bitwise_equal(storage, base));
}

TEST_CASE("nested dicts, lists, tuples and plain values round-trip") {
  dcpp::test::TempDir dir;
  StateDict inner;
  inner.insert("w", at::randn({2, 2}));
  inner.insert("name", "layer.0");
  StateDict original;
  original.insert("model", inner);
  original.insert("tensors", StateList{at::randn({3}), at::randn({1})});
  original.insert("history", StateList{1, 2, 3});
  original.insert("groups", StateList{inner});
  original.insert("betas", c10::IValue(std::make_tuple(0.9, 0.999)));
  original.insert("none", c10::IValue());
  original.insert("flag", true);
  original.insert("lr", 1e-3);
  original.insert("big", int64_t{1} << 62);
  original.insert("text", "h\xc3\xa9llo");
  dcpp::save(original, dir.path(), quick_save());

  StateDict loaded = dcpp::load_from_keys(dir.path());
  REQUIRE(dcpp::test::bitwise_equal(loaded.at("model").dict().at("w").tensor(),
                                    inner.at("w").tensor()));
  REQUIRE(loaded.at("model").dict().at("name").value().toStringRef() == "layer.0");
  REQUIRE(loaded.at("tensors").list().size() == 2);
  REQUIRE(dcpp::test::bitwise_equal(loaded.at("tensors").list()[1].tensor(),
                                    original.at("tensors").list()[1].tensor()));
  REQUIRE(loaded.at("history").list()[2].value().toInt() == 3);
  REQUIRE(loaded.at("groups").list()[0].dict().at("name").value().toStringRef() == "layer.0");
  const auto& betas = loaded.at("betas").value().toTupleRef().elements();
  REQUIRE(betas.size() == 2);
  REQUIRE(betas[1].toDouble() == 0.999);
  REQUIRE(loaded.at("none").value().isNone());
  REQUIRE(loaded.at("flag").value().toBool());
  REQUIRE(loaded.at("lr").value().toDouble() == 1e-3);
  REQUIRE(loaded.at("big").value().toInt() == int64_t{1} << 62);
  REQUIRE(loaded.at("text").value().toStringRef() == "h\xc3\xa9llo");

  const dcpp::Metadata metadata = dcpp::read_metadata(dir.path());
  auto path_of = [&](const std::string& key) {
    for (const auto& [k, path] : metadata.planner_data) {
      if (k == key) return dcpp::join_path(path) + "#" + std::to_string(path.size());
    }
    return std::string("absent");
  };
  REQUIRE(path_of("groups.0.name") == "groups.0.name#3");
}

TEST_CASE("sharded tensors save their chunks and load into another sharding") {
  dcpp::test::TempDir dir;
  const at::Tensor full = at::randn({10, 6});
  // Saved as three uneven row shards held by this one process.
  std::vector<dcpp::Shard> shards;
  for (int64_t part = 0; part < 3; ++part) {
    auto piece = ShardedTensor::from_chunk_of(full, 0, part, 3);
    shards.push_back(piece.local_shards().front());
  }
  StateDict original;
  original.insert("w", ShardedTensor({10, 6}, shards));
  dcpp::save(original, dir.path(), quick_save());

  const auto metadata = dcpp::read_metadata(dir.path());
  REQUIRE(
      std::get<dcpp::TensorStorageMetadata>(metadata.state_dict_metadata[0].second).chunks.size() ==
      3);

  // Loaded as two column shards.
  at::Tensor left = at::zeros({10, 4});
  at::Tensor right = at::zeros({10, 2});
  StateDict target;
  target.insert("w",
                ShardedTensor({10, 6}, {dcpp::Shard{left, {0, 0}}, dcpp::Shard{right, {0, 4}}}));
  dcpp::load(target, dir.path());
  REQUIRE(dcpp::test::bitwise_equal(left, full.narrow(1, 0, 4)));
  REQUIRE(dcpp::test::bitwise_equal(right, full.narrow(1, 4, 2)));

  // And as one plain tensor.
  StateDict plain;
  plain.insert("w", at::zeros({10, 6}));
  dcpp::load(plain, dir.path());
  REQUIRE(dcpp::test::bitwise_equal(plain.at("w").tensor(), full));
}

TEST_CASE("Stateful objects are saved through state_dict() and loaded as DCP does") {
  struct Progress : dcpp::Stateful {
    int64_t step = 0;
    at::Tensor weights = at::zeros({4});
    int loads = 0;
    StateDict state_dict() override {
      StateDict sd;
      sd.insert("step", step);
      sd.insert("weights", weights);
      return sd;
    }
    void load_state_dict(const StateDict& sd) override {
      step = sd.at("step").value().toInt();
      ++loads;
    }
  };
  dcpp::test::TempDir dir;
  auto saved = std::make_shared<Progress>();
  saved->step = 42;
  saved->weights = at::arange(4, at::kFloat);
  StateDict original;
  original.insert("progress", saved);
  dcpp::save(original, dir.path(), quick_save());

  auto restored = std::make_shared<Progress>();
  StateDict target;
  target.insert("progress", restored);
  dcpp::load(target, dir.path());
  REQUIRE(restored->loads == 1);
  REQUIRE(restored->step == 42);
  REQUIRE(dcpp::test::bitwise_equal(restored->weights, saved->weights));  // filled in place
  REQUIRE(target.at("progress").is_stateful());
}

TEST_CASE("keys a Stateful says may be missing are dropped when the checkpoint lacks them") {
  // A writer whose newer version added "options.flag" (and "extra" at the top of its dict).
  struct Versioned : dcpp::Stateful {
    bool with_new_keys = true;
    std::optional<bool> loaded_flag;
    bool loaded_extra = false;
    int64_t loaded_count = -1;
    StateDict state_dict() override {
      StateDict options;
      options.insert("count", int64_t{0});
      if (with_new_keys) {
        options.insert("flag", false);
      }
      StateDict sd;
      sd.insert("options", options);
      sd.insert("weights", at::zeros({3}));
      if (with_new_keys) {
        sd.insert("extra", 0);
      }
      return sd;
    }
    void load_state_dict(const StateDict& sd) override {
      const StateDict& options = sd.at("options").dict();
      loaded_count = options.at("count").value().toInt();
      if (const dcpp::StateValue* flag = options.find("flag")) {
        loaded_flag = flag->value().toBool();
      }
      loaded_extra = sd.contains("extra");
    }
    bool may_be_missing(const std::string& key) const override {
      return key == "options.flag" || key == "extra";
    }
  };
  // The older version's checkpoint: without the newer keys.
  dcpp::test::TempDir old_dir;
  StateDict old_state;
  StateDict old_options;
  old_options.insert("count", int64_t{7});
  StateDict old_inner;
  old_inner.insert("options", old_options);
  old_inner.insert("weights", at::ones({3}));
  old_state.insert("nested", StateDict());
  old_state.at("nested").dict().insert("v", old_inner);
  dcpp::save(old_state, old_dir.path(), quick_save());

  auto versioned = std::make_shared<Versioned>();
  StateDict target;
  target.insert("nested", StateDict());
  target.at("nested").dict().insert("v", versioned);
  const dcpp::IncompatibleKeys report = dcpp::load(target, old_dir.path());  // strict
  REQUIRE(report.missing_keys.empty());
  REQUIRE(versioned->loaded_count == 7);
  REQUIRE_FALSE(versioned->loaded_flag.has_value());
  REQUIRE_FALSE(versioned->loaded_extra);

  // The newer version's checkpoint: the keys are loaded as any other.
  dcpp::test::TempDir new_dir;
  auto writer = std::make_shared<Versioned>();
  StateDict new_state;
  new_state.insert("v", writer);
  dcpp::save(new_state, new_dir.path(), quick_save());
  auto reader = std::make_shared<Versioned>();
  StateDict new_target;
  new_target.insert("v", reader);
  dcpp::load(new_target, new_dir.path());
  REQUIRE(reader->loaded_flag == std::optional<bool>(false));
  REQUIRE(reader->loaded_extra);

  // Keys not declared optional still fail a strict load.
  struct Strict : Versioned {
    bool may_be_missing(const std::string&) const override { return false; }
  };
  StateDict strict_target;
  strict_target.insert("nested", StateDict());
  strict_target.at("nested").dict().insert("v", std::make_shared<Strict>());
  REQUIRE_THROWS_WITH(
      dcpp::load(strict_target, old_dir.path()),
      Catch::Contains("'nested.v.options.flag'") && Catch::Contains("'nested.v.extra'"));
}

TEST_CASE("strict loads list missing keys, partial loads skip them") {
  dcpp::test::TempDir dir;
  StateDict original;
  original.insert("a", at::ones({2}));
  original.insert("extra", 1);
  dcpp::save(original, dir.path(), quick_save());

  StateDict target;
  target.insert("a", at::zeros({2}));
  target.insert("b", at::zeros({2}));
  target.insert("c", 0);
  REQUIRE_THROWS_WITH(dcpp::load(target, dir.path()),
                      Catch::Contains("'b', 'c'") && Catch::Contains("'extra'"));

  dcpp::LoadOptions partial;
  partial.allow_partial_load = true;
  const dcpp::IncompatibleKeys report = dcpp::load(target, dir.path(), partial);
  REQUIRE(report.missing_keys == std::vector<std::string>{"b", "c"});
  REQUIRE(report.unexpected_keys == std::vector<std::string>{"extra"});
  // One type for both of PyTorch's reports: dcpp::load's and set_model_state_dict's.
  static_assert(std::is_same_v<decltype(dcpp::load(target, dir.path())),
                               decltype(dcpp::set_model_state_dict(
                                   std::declval<torch::nn::Module&>(), target))>);
  REQUIRE(target.at("a").tensor().equal(at::ones({2})));
  REQUIRE(target.at("b").tensor().equal(at::zeros({2})));
}

TEST_CASE("a dtype or shape mismatch names the key, both shapes and both dtypes") {
  dcpp::test::TempDir dir;
  StateDict original;
  original.insert("w", at::ones({2, 3}));
  dcpp::save(original, dir.path(), quick_save());

  StateDict wrong_shape;
  wrong_shape.insert("w", at::zeros({3, 2}));
  REQUIRE_THROWS_WITH(dcpp::load(wrong_shape, dir.path()), Catch::Contains("'w'") &&
                                                               Catch::Contains("[2, 3]") &&
                                                               Catch::Contains("[3, 2]"));
  StateDict wrong_dtype;
  wrong_dtype.insert("w", at::zeros({2, 3}, at::kDouble));
  REQUIRE_THROWS_WITH(dcpp::load(wrong_dtype, dir.path()), Catch::Contains("'w'") &&
                                                               Catch::Contains("Float") &&
                                                               Catch::Contains("Double"));
}

TEST_CASE("load_from_keys loads only the keys asked for and what lies under them") {
  dcpp::test::TempDir dir;
  StateDict model;
  model.insert("0.weight", at::ones({2}));
  StateDict original;
  original.insert("model", model);
  original.insert("optim", model);
  original.insert("step", 5);
  dcpp::save(original, dir.path(), quick_save());

  StateDict only_model = dcpp::load_from_keys(dir.path(), {"model"});
  REQUIRE(only_model.size() == 1);
  REQUIRE(only_model.at("model").dict().at("0.weight").tensor().equal(at::ones({2})));
  StateDict step = dcpp::load_from_keys(dir.path(), {"step"});
  REQUIRE(step.size() == 1);
  REQUIRE(step.at("step").value().toInt() == 5);
}

TEST_CASE("the directory holds DCP's files and nothing half-written") {
  dcpp::test::TempDir dir;
  StateDict original;
  original.insert("a", at::ones({4}));
  original.insert("b", 3);
  dcpp::save(original, dir.path());  // with fsync
  std::set<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir.path())) {
    names.insert(entry.path().filename().string());
  }
  REQUIRE(names == std::set<std::string>{".checksums", ".metadata", "__0_0.distcp"});
}

TEST_CASE("writer threads and one file per item produce loadable checkpoints") {
  StateDict original;
  for (int i = 0; i < 9; ++i) {
    original.insert("t" + std::to_string(i), at::randn({i + 1, 3}));
  }
  original.insert("v", 1);
  for (bool per_rank : {true, false}) {
    dcpp::test::TempDir dir;
    dcpp::SaveOptions options = quick_save();
    options.file_system.thread_count = 3;
    options.file_system.single_file_per_rank = per_rank;
    dcpp::save(original, dir.path(), options);
    std::size_t files = 0;
    for (const auto& entry : fs::directory_iterator(dir.path())) {
      files += entry.path().extension() == ".distcp";
    }
    REQUIRE(files == (per_rank ? 3u : 10u));
    dcpp::LoadOptions load_options;
    load_options.file_system.thread_count = 2;
    StateDict loaded = zeros_like_tree(original);
    dcpp::load(loaded, dir.path(), load_options);
    for (int i = 0; i < 9; ++i) {
      const std::string key = "t" + std::to_string(i);
      REQUIRE(dcpp::test::bitwise_equal(loaded.at(key).tensor(), original.at(key).tensor()));
    }
  }
}

TEST_CASE("saving over a checkpoint is refused unless asked, and never damages it") {
  dcpp::test::TempDir dir;
  StateDict first;
  first.insert("w", at::full({3}, 1.0));
  dcpp::save(first, dir.path(), quick_save());

  StateDict second;
  second.insert("w", at::full({3}, 2.0));
  REQUIRE_THROWS_WITH(dcpp::save(second, dir.path(), quick_save()),
                      Catch::Contains("already holds a checkpoint"));
  StateDict loaded;
  loaded.insert("w", at::zeros({3}));
  dcpp::load(loaded, dir.path());
  REQUIRE(loaded.at("w").tensor().equal(first.at("w").tensor()));

  // A save that fails half-way (a value that cannot be pickled) leaves the old one loadable.
  StateDict failing;
  failing.insert("w", at::full({3}, 3.0));
  failing.insert("bad", c10::IValue(c10::make_intrusive<c10::ivalue::Future>(c10::IntType::get())));
  dcpp::SaveOptions overwrite = quick_save();
  overwrite.file_system.overwrite = true;
  REQUIRE_THROWS_AS(dcpp::save(failing, dir.path(), overwrite), dcpp::CheckpointError);
  dcpp::load(loaded, dir.path());
  REQUIRE(loaded.at("w").tensor().equal(first.at("w").tensor()));

  dcpp::save(second, dir.path(), overwrite);
  dcpp::load(loaded, dir.path());
  REQUIRE(loaded.at("w").tensor().equal(second.at("w").tensor()));
  std::size_t data_files = 0;
  for (const auto& entry : fs::directory_iterator(dir.path())) {
    data_files += entry.path().extension() == ".distcp";
  }
  REQUIRE(data_files == 1);  // the old checkpoint's files were removed after the commit
}

TEST_CASE("large tensors, checksummed and read by two threads, round-trip and catch corruption") {
  dcpp::test::TempDir dir;
  StateDict original;
  original.insert("big", at::randn({3, 1 << 20}));  // 12 MiB: the multi-threaded paths
  dcpp::save(original, dir.path(), quick_save());
  StateDict loaded = zeros_like_tree(original);
  dcpp::load(loaded, dir.path());
  REQUIRE(dcpp::test::bitwise_equal(loaded.at("big").tensor(), original.at("big").tensor()));

  const auto info = dcpp::read_metadata(dir.path()).storage_data.front().second;
  const fs::path file = dir / info.relative_path;
  std::string bytes;
  {
    std::ifstream in(file, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  // A flipped byte in either half of the payload is caught, whichever thread reads it.
  for (double where : {0.25, 0.75}) {
    std::string damaged = bytes;
    damaged[static_cast<std::size_t>(info.offset + info.length * where)] ^= 0x01;
    std::ofstream(file, std::ios::binary | std::ios::trunc) << damaged;
    REQUIRE_THROWS_WITH(dcpp::load(loaded, dir.path()),
                        Catch::Contains("'big'") && Catch::Contains("corrupted"));
  }
  std::ofstream(file, std::ios::binary | std::ios::trunc) << bytes;
  dcpp::load(loaded, dir.path());
  REQUIRE(dcpp::test::bitwise_equal(loaded.at("big").tensor(), original.at("big").tensor()));
}
