// SavePlanCache on one process: a save of the structure of the last committed one reuses its
// global plan and still writes the values of the moment; any change in structure plans in full; a
// failed save leaves the cache as it was. Several ranks: reshard_test.cpp.

#include "dcpp_test.h"

#include <dcpp/extend.h>

namespace fs = std::filesystem;

namespace {

dcpp::SaveOptions cached_save(std::shared_ptr<dcpp::SavePlanCache> cache) {
  dcpp::SaveOptions options;
  options.file_system.sync_files = false;
  options.plan_cache = std::move(cache);
  return options;
}

dcpp::StateDict model_state(float scale) {
  dcpp::StateDict state;
  state.insert("w", at::arange(12, at::kFloat).reshape({3, 4}).mul(scale));
  state.insert("b", at::arange(5, at::kLong).add(static_cast<int64_t>(scale)));
  state.insert("step", c10::IValue(static_cast<int64_t>(scale)));
  return state;
}

// Every tensor and value of `expected`, loaded from `dir`, equals it bit for bit.
void check_loads_as(const fs::path& dir, const dcpp::StateDict& expected) {
  const dcpp::StateDict loaded = dcpp::load_from_keys(dir);
  REQUIRE(loaded.size() == expected.size());
  for (const auto& item : expected) {
    INFO(item.key);
    REQUIRE(loaded.contains(item.key));
    if (item.value.is_tensor()) {
      CHECK(dcpp::test::bitwise_equal(loaded.at(item.key).tensor(), item.value.tensor()));
    } else {
      CHECK(loaded.at(item.key).value().toInt() == item.value.value().toInt());
    }
  }
}

std::vector<std::string> keys_of(const dcpp::Metadata& metadata) {
  std::vector<std::string> keys;
  for (const auto& item : metadata.state_dict_metadata) {
    keys.push_back(item.first);
  }
  return keys;
}

// Fails write_data while `fail` is set.
class FailingWriter final : public dcpp::FileSystemWriter {
 public:
  using FileSystemWriter::FileSystemWriter;
  bool fail = false;
  std::vector<dcpp::WriteResult> write_data(const dcpp::SavePlan& plan,
                                            dcpp::SavePlanner& planner) override {
    if (fail) {
      throw dcpp::CheckpointError(dcpp::ErrorKind::kIo, "disk unplugged");
    }
    return FileSystemWriter::write_data(plan, planner);
  }
};

}  // namespace

TEST_CASE("a save of the last save's structure reuses its global plan and writes today's values") {
  dcpp::test::TempDir dir;
  auto cache = std::make_shared<dcpp::SavePlanCache>();
  const dcpp::Metadata first = dcpp::save(model_state(1), dir / "1", cached_save(cache));
  CHECK(cache->full_plans() == 1);
  CHECK(cache->reused_plans() == 0);
  const dcpp::Metadata second = dcpp::save(model_state(3), dir / "2", cached_save(cache));
  CHECK(cache->full_plans() == 1);
  CHECK(cache->reused_plans() == 1);
  CHECK(keys_of(second) == keys_of(first));
  check_loads_as(dir / "2", model_state(3));
  check_loads_as(dir / "1", model_state(1));
}

TEST_CASE("a new key, shape or dtype after a cached save plans in full") {
  dcpp::test::TempDir dir;
  auto cache = std::make_shared<dcpp::SavePlanCache>();
  dcpp::save(model_state(1), dir / "1", cached_save(cache));

  dcpp::StateDict added = model_state(2);
  added.insert("extra", at::ones({2}, at::kDouble));
  const dcpp::Metadata with_extra = dcpp::save(added, dir / "2", cached_save(cache));
  CHECK(cache->full_plans() == 2);
  CHECK(keys_of(with_extra).size() == 4);
  check_loads_as(dir / "2", added);

  dcpp::StateDict resized = model_state(2);
  resized["w"] = at::arange(16, at::kFloat).reshape({4, 4});
  dcpp::save(resized, dir / "3", cached_save(cache));
  CHECK(cache->full_plans() == 3);
  check_loads_as(dir / "3", resized);

  dcpp::StateDict retyped = model_state(2);
  retyped["w"] = at::arange(12, at::kDouble).reshape({3, 4});
  dcpp::save(retyped, dir / "4", cached_save(cache));
  CHECK(cache->full_plans() == 4);
  check_loads_as(dir / "4", retyped);

  dcpp::save(retyped, dir / "5", cached_save(cache));
  CHECK(cache->full_plans() == 4);
  CHECK(cache->reused_plans() == 1);
  check_loads_as(dir / "5", retyped);
}

TEST_CASE("a failed save leaves the plan cache as the last committed save left it") {
  dcpp::test::TempDir dir;
  auto cache = std::make_shared<dcpp::SavePlanCache>();
  FailingWriter first(dir / "1", dcpp::FileSystemWriterOptions().with_sync_files(false));
  dcpp::save(model_state(1), first, cached_save(cache));

  FailingWriter failing(dir / "2", dcpp::FileSystemWriterOptions().with_sync_files(false));
  failing.fail = true;
  CHECK_THROWS_AS(dcpp::save(model_state(2), failing, cached_save(cache)), dcpp::CheckpointError);
  CHECK(cache->full_plans() == 1);
  CHECK(cache->reused_plans() == 0);
  CHECK_FALSE(fs::exists(dir / "2" / ".metadata"));

  FailingWriter third(dir / "3", dcpp::FileSystemWriterOptions().with_sync_files(false));
  dcpp::save(model_state(3), third, cached_save(cache));
  CHECK(cache->reused_plans() == 1);
  check_loads_as(dir / "3", model_state(3));
}

TEST_CASE("a cached save over an existing checkpoint writes new file names and loads back") {
  // The file system writer names the files of a save into a directory holding a checkpoint with a
  // fresh tag: the final plan changes though the global plan is reused.
  dcpp::test::TempDir dir;
  auto cache = std::make_shared<dcpp::SavePlanCache>();
  dcpp::SaveOptions options = cached_save(cache);
  options.file_system.overwrite = true;
  dcpp::save(model_state(1), dir / "ckpt", options);
  dcpp::save(model_state(5), dir / "ckpt", options);
  CHECK(cache->reused_plans() == 1);
  check_loads_as(dir / "ckpt", model_state(5));
}

TEST_CASE("a plan cache is not used by a save of another planner or storage writer type") {
  dcpp::test::TempDir dir;
  auto cache = std::make_shared<dcpp::SavePlanCache>();
  dcpp::save(model_state(1), dir / "1", cached_save(cache));
  FailingWriter writer(dir / "2", dcpp::FileSystemWriterOptions().with_sync_files(false));
  dcpp::save(model_state(2), writer, cached_save(cache));
  CHECK(cache->full_plans() == 2);
  class OtherPlanner final : public dcpp::DefaultSavePlanner {};
  dcpp::SaveOptions options = cached_save(cache);
  options.planner = std::make_shared<OtherPlanner>();
  dcpp::save(model_state(3), dir / "3", options);
  CHECK(cache->full_plans() == 3);
  CHECK(cache->reused_plans() == 0);
  check_loads_as(dir / "3", model_state(3));
}

TEST_CASE("a plan cache is not used by a planner of the same type with other settings") {
  // Its setting, a label, goes into the Metadata its global plan builds.
  class LabellingPlanner final : public dcpp::DefaultSavePlanner {
   public:
    std::string label;
    std::pair<std::vector<dcpp::SavePlan>, dcpp::Metadata> create_global_plan(
        std::vector<dcpp::SavePlan> plans) override {
      auto planned = DefaultSavePlanner::create_global_plan(std::move(plans));
      planned.second.storage_meta.emplace();
      planned.second.storage_meta->modules = {label};
      return planned;
    }
    std::string plan_cache_key() const override { return "label=" + label; }
  };
  dcpp::test::TempDir dir;
  auto cache = std::make_shared<dcpp::SavePlanCache>();
  auto planner = std::make_shared<LabellingPlanner>();
  dcpp::SaveOptions options = cached_save(cache);
  options.planner = planner;
  planner->label = "a";
  dcpp::save(model_state(1), dir / "1", options);
  dcpp::save(model_state(2), dir / "2", options);  // the same settings: reused
  CHECK(cache->reused_plans() == 1);
  planner->label = "b";
  dcpp::save(model_state(3), dir / "3", options);
  CHECK(cache->full_plans() == 2);
  const dcpp::Metadata third = dcpp::read_metadata(dir / "3");
  REQUIRE(third.storage_meta.has_value());
  CHECK(third.storage_meta->modules == std::vector<std::string>{"b"});
  check_loads_as(dir / "3", model_state(3));
}
