// What a failed load or save leaves behind, on one process: Statefuls put back, errors as
// CheckpointErrors, and (LoadOptions::all_or_nothing) targets untouched.

#include "dcpp_test.h"

#include <dcpp/checkpoint/checkpointer.h>
#include <dcpp/core/checkpoint_error.h>
#include <dcpp/state_dict/stateful.h>

#include <fstream>
#include <stdexcept>

using dcpp::StateDict;
namespace fs = std::filesystem;

namespace {

dcpp::SaveOptions unsynced_save() {
  dcpp::SaveOptions options;
  options.file_system.sync_files = false;
  return options;
}

// A Stateful holding one tensor and a counter; its state_dict() or load_state_dict() throw the
// next `*_failures` times they are called.
struct Counter : dcpp::Stateful {
  at::Tensor weights = at::zeros({8});
  int64_t count = 0;
  int loads = 0;
  int state_dict_failures = 0;
  int load_failures = 0;
  bool throw_torch_error = false;

  StateDict state_dict() override {
    if (state_dict_failures > 0) {
      --state_dict_failures;
      throw std::runtime_error("state_dict() is not ready");
    }
    StateDict sd;
    sd.insert("weights", weights);
    sd.insert("count", count);
    return sd;
  }
  void load_state_dict(const StateDict& sd) override {
    if (load_failures > 0) {
      --load_failures;
      TORCH_CHECK(!throw_torch_error, "the counter refused its state");
      throw std::runtime_error("the counter refused its state");
    }
    count = sd.at("count").value().toInt();
    ++loads;
  }
};

void save_counters(const fs::path& directory) {
  auto a = std::make_shared<Counter>();
  auto b = std::make_shared<Counter>();
  a->weights = at::arange(8, at::kFloat);
  a->count = 3;
  b->weights = at::arange(8, at::kFloat).neg();
  b->count = 4;
  StateDict original;
  original.insert("a", a);
  original.insert("b", b);
  original.insert("plain", at::linspace(0, 1, 16));
  dcpp::save(original, directory, unsynced_save());
}

// Flips one byte in the middle of `key`'s bytes in its data file.
void corrupt_item(const fs::path& directory, const std::string& key) {
  for (const auto& [index, info] : dcpp::read_metadata(directory).storage_data) {
    if (index.fqn != key) {
      continue;
    }
    std::fstream file(directory / info.relative_path,
                      std::ios::binary | std::ios::in | std::ios::out);
    const auto where = static_cast<std::streamoff>(info.offset + info.length / 2);
    file.seekg(where);
    char byte = 0;
    file.read(&byte, 1);
    byte = static_cast<char>(byte ^ 0x10);
    file.seekp(where);
    file.write(&byte, 1);
    return;
  }
  FAIL("no item for " << key);
}

}  // namespace

TEST_CASE("a Stateful whose state_dict() throws leaves every Stateful in place for a retry") {
  dcpp::test::TempDir dir;
  save_counters(dir.path());
  auto a = std::make_shared<Counter>();
  auto b = std::make_shared<Counter>();
  b->state_dict_failures = 1;
  StateDict target;
  target.insert("a", a);  // swapped before b fails
  target.insert("b", b);
  REQUIRE_THROWS_WITH(dcpp::load(target, dir.path()),
                      Catch::Contains("'b'") && Catch::Contains("state_dict() is not ready"));
  REQUIRE(target.at("a").is_stateful());
  REQUIRE(target.at("b").is_stateful());

  dcpp::load(target, dir.path());  // the retry loads both through load_state_dict()
  REQUIRE(a->loads == 1);
  REQUIRE(b->loads == 1);
  REQUIRE(a->count == 3);
  REQUIRE(b->count == 4);
  REQUIRE(dcpp::test::bitwise_equal(a->weights, at::arange(8, at::kFloat)));
}

TEST_CASE("a save whose Stateful throws fails with a CheckpointError naming the key") {
  dcpp::test::TempDir dir;
  auto a = std::make_shared<Counter>();
  a->state_dict_failures = 1;
  StateDict original;
  original.insert("a", a);
  REQUIRE_THROWS_AS(dcpp::save(original, dir / "ckpt", unsynced_save()), dcpp::CheckpointError);
  REQUIRE_THROWS_WITH(
      [&] {
        a->state_dict_failures = 1;
        dcpp::save(original, dir / "ckpt", unsynced_save());
      }(),
      Catch::Contains("key 'a'") && Catch::Contains("state_dict() is not ready"));
  REQUIRE(original.at("a").is_stateful());
}

TEST_CASE("on one process, a user's exception from load_state_dict() becomes a CheckpointError") {
  dcpp::test::TempDir dir;
  save_counters(dir.path());
  for (bool torch_error : {false, true}) {
    auto a = std::make_shared<Counter>();
    a->load_failures = 1;
    a->throw_torch_error = torch_error;
    StateDict target;
    target.insert("a", a);
    dcpp::LoadOptions options;
    options.allow_partial_load = true;
    REQUIRE_THROWS_AS(dcpp::load(target, dir.path(), options), dcpp::CheckpointError);
    a->load_failures = 1;
    REQUIRE_THROWS_WITH(dcpp::load(target, dir.path(), options),
                        Catch::Contains("checkpoint load failed") && Catch::Contains("rank 0: ") &&
                            Catch::Contains("the counter refused its state"));
    REQUIRE(target.at("a").is_stateful());
  }
}

TEST_CASE("an all-or-nothing load that finds corruption leaves the targets as they were") {
  dcpp::test::TempDir dir;
  save_counters(dir.path());
  corrupt_item(dir.path(), "plain");
  auto a = std::make_shared<Counter>();
  auto b = std::make_shared<Counter>();
  a->weights.fill_(7);
  b->weights.fill_(9);
  const at::Tensor plain = at::full({16}, 5.0);
  StateDict target;
  target.insert("a", a);
  target.insert("b", b);
  target.insert("plain", plain);
  dcpp::LoadOptions options;
  options.all_or_nothing = true;
  REQUIRE_THROWS_WITH(dcpp::load(target, dir.path(), options),
                      Catch::Contains("'plain'") && Catch::Contains("corrupted"));
  REQUIRE(dcpp::test::bitwise_equal(a->weights, at::full({8}, 7.0)));
  REQUIRE(dcpp::test::bitwise_equal(b->weights, at::full({8}, 9.0)));
  REQUIRE(dcpp::test::bitwise_equal(plain, at::full({16}, 5.0)));
  REQUIRE(a->loads == 0);
  REQUIRE(b->loads == 0);
  REQUIRE(target.at("a").is_stateful());
}

TEST_CASE("an all-or-nothing load that succeeds fills the targets' own storage") {
  dcpp::test::TempDir dir;
  save_counters(dir.path());
  auto a = std::make_shared<Counter>();
  const void* storage = a->weights.data_ptr();
  const at::Tensor plain = at::zeros({16});
  const at::Tensor untouched = at::full({2}, 3.0);
  StateDict target;
  target.insert("a", a);
  target.insert("plain", plain);
  target.insert("not_in_checkpoint", untouched);
  dcpp::LoadOptions options;
  options.all_or_nothing = true;
  options.allow_partial_load = true;
  const dcpp::IncompatibleKeys report = dcpp::load(target, dir.path(), options);
  REQUIRE(report.missing_keys == std::vector<std::string>{"not_in_checkpoint"});
  REQUIRE(a->weights.data_ptr() == storage);
  REQUIRE(dcpp::test::bitwise_equal(a->weights, at::arange(8, at::kFloat)));
  REQUIRE(a->count == 3);
  REQUIRE(a->loads == 1);
  REQUIRE(dcpp::test::bitwise_equal(plain, at::linspace(0, 1, 16)));
  REQUIRE(dcpp::test::bitwise_equal(target.at("not_in_checkpoint").tensor(), at::full({2}, 3.0)));
}

TEST_CASE("the empty-state-dict planner refuses a state dict that is not empty") {
  dcpp::test::TempDir dir;
  save_counters(dir.path());
  auto a = std::make_shared<Counter>();
  StateDict target;
  target.insert("a", a);
  dcpp::LoadOptions options;
  options.planner = dcpp::make_empty_state_dict_load_planner();
  REQUIRE_THROWS_WITH(dcpp::load(target, dir.path(), options),
                      Catch::Contains("empty StateDict") && Catch::Contains("'a'"));
  REQUIRE(target.size() == 1);
  REQUIRE(target.at("a").is_stateful());
  REQUIRE(a->loads == 0);
}
