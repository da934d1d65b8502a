// DefaultSavePlanner, DefaultLoadPlanner, FileSystemWriter and FileSystemReader subclassed as DCP
// users subclass them in Python: each hook is called, and what it changes is what lands on disk
// or in memory, bit for bit.

#include "dcpp_test.h"

#include <dcpp/extend.h>

#include <atomic>
#include <set>

namespace fs = std::filesystem;

namespace {

dcpp::FileSystemWriterOptions quick_writes() {
  return dcpp::FileSystemWriterOptions().with_sync_files(false);
}

dcpp::SaveOptions subclass_quick_save() {
  dcpp::SaveOptions options;
  options.file_system = quick_writes();
  return options;
}

dcpp::StateDict two_tensors() {
  dcpp::StateDict state;
  state.insert("w", at::arange(12, at::kFloat).reshape({3, 4}));
  state.insert("b", at::arange(5, at::kLong));
  state.insert("step", c10::IValue(int64_t{7}));
  return state;
}

// Writes every float tensor negated: transform_object sees what lookup_object found.
class NegatingSavePlanner final : public dcpp::DefaultSavePlanner {
 public:
  std::atomic<int> lookups{0};

 protected:
  dcpp::WriteItemData lookup_object(const dcpp::MetadataIndex& index) override {
    ++lookups;
    return DefaultSavePlanner::lookup_object(index);
  }
  dcpp::WriteItemData transform_object(const dcpp::WriteItem& item,
                                       dcpp::WriteItemData object) override {
    if (auto* tensor = std::get_if<at::Tensor>(&object)) {
      if (tensor->scalar_type() == at::kFloat) return tensor->neg();
    }
    return DefaultSavePlanner::transform_object(item, std::move(object));
  }
};

// Loads key "w" into a tensor of its own instead of the state dict's.
class RedirectingLoadPlanner final : public dcpp::DefaultLoadPlanner {
 public:
  at::Tensor elsewhere = at::zeros({3, 4}, at::kFloat);

 protected:
  at::Tensor lookup_tensor(const dcpp::MetadataIndex& index) override {
    return index.fqn == "w" ? elsewhere : DefaultLoadPlanner::lookup_tensor(index);
  }
};

// Names its data files itself, through the plan's storage_data, as DCP's writers may.
class PrefixingWriter final : public dcpp::FileSystemWriter {
 public:
  using FileSystemWriter::FileSystemWriter;
  dcpp::SavePlan prepare_local_plan(dcpp::SavePlan plan) override {
    plan = FileSystemWriter::prepare_local_plan(std::move(plan));
    plan.storage_data = "__custom_";
    return plan;
  }
};

// Records what its plan hooks see: a local plan's storage_data reaches the global step and the
// final plan, across the ranks' plan messages.
class RecordingReader final : public dcpp::FileSystemReader {
 public:
  using FileSystemReader::FileSystemReader;
  std::vector<std::string> global_saw;
  std::string read_saw;

  dcpp::LoadPlan prepare_local_plan(dcpp::LoadPlan plan) override {
    plan.storage_data = "local";
    return plan;
  }
  std::vector<dcpp::LoadPlan> prepare_global_plan(std::vector<dcpp::LoadPlan> plans) override {
    for (dcpp::LoadPlan& plan : plans) {
      global_saw.push_back(plan.storage_data);
      plan.storage_data = "global";
    }
    return plans;
  }
  void read_data(const dcpp::LoadPlan& plan, dcpp::LoadPlanner& planner) override {
    read_saw = plan.storage_data;
    FileSystemReader::read_data(plan, planner);
  }
};

}  // namespace

TEST_CASE("a DefaultSavePlanner subclass changes what is written through transform_object") {
  dcpp::test::TempDir dir;
  const dcpp::StateDict original = two_tensors();
  auto planner = std::make_shared<NegatingSavePlanner>();
  dcpp::SaveOptions options = subclass_quick_save();
  options.planner = planner;
  dcpp::save(original, dir.path(), options);
  CHECK(planner->lookups == 3);

  dcpp::StateDict loaded = dcpp::load_from_keys(dir.path());
  REQUIRE(dcpp::test::bitwise_equal(loaded.at("w").tensor(), original.at("w").tensor().neg()));
  REQUIRE(dcpp::test::bitwise_equal(loaded.at("b").tensor(), original.at("b").tensor()));
  REQUIRE(loaded.at("step").value().toInt() == 7);
}

TEST_CASE("a DefaultLoadPlanner subclass chooses where a tensor lands through lookup_tensor") {
  dcpp::test::TempDir dir;
  const dcpp::StateDict original = two_tensors();
  dcpp::save(original, dir.path(), subclass_quick_save());

  dcpp::StateDict target;
  target.insert("w", at::full({3, 4}, -1.0f));
  target.insert("b", at::zeros({5}, at::kLong));
  auto planner = std::make_shared<RedirectingLoadPlanner>();
  dcpp::LoadOptions options;
  options.planner = planner;
  dcpp::load(target, dir.path(), options);
  REQUIRE(dcpp::test::bitwise_equal(planner->elsewhere, original.at("w").tensor()));
  REQUIRE(dcpp::test::bitwise_equal(target.at("w").tensor(), at::full({3, 4}, -1.0f)));
  REQUIRE(dcpp::test::bitwise_equal(target.at("b").tensor(), original.at("b").tensor()));
}

TEST_CASE("a FileSystemWriter subclass names its files through prepare_local_plan") {
  dcpp::test::TempDir dir;
  const dcpp::StateDict original = two_tensors();
  PrefixingWriter writer(dir.path(), quick_writes());
  const dcpp::Metadata metadata = dcpp::save(original, writer);
  std::set<std::string> files;
  for (const auto& [index, info] : metadata.storage_data) files.insert(info.relative_path);
  REQUIRE(files == std::set<std::string>{"__custom_0.distcp"});
  REQUIRE(fs::exists(dir.path() / "__custom_0.distcp"));
  REQUIRE_FALSE(fs::exists(dir.path() / "__0_0.distcp"));

  dcpp::StateDict loaded = dcpp::load_from_keys(dir.path());
  REQUIRE(dcpp::test::bitwise_equal(loaded.at("w").tensor(), original.at("w").tensor()));
  REQUIRE(dcpp::test::bitwise_equal(loaded.at("b").tensor(), original.at("b").tensor()));
}

TEST_CASE("a FileSystemReader subclass gets the local and global plan hooks, in order") {
  dcpp::test::TempDir dir;
  const dcpp::StateDict original = two_tensors();
  dcpp::save(original, dir.path(), subclass_quick_save());

  dcpp::StateDict target;
  target.insert("w", at::zeros({3, 4}, at::kFloat));
  RecordingReader reader(dir.path());
  dcpp::load(target, reader);
  REQUIRE(reader.global_saw == std::vector<std::string>{"local"});
  REQUIRE(reader.read_saw == "global");
  REQUIRE(dcpp::test::bitwise_equal(target.at("w").tensor(), original.at("w").tensor()));
}

TEST_CASE("the default planners' accessors refuse use before set_up") {
  struct Probe : dcpp::DefaultLoadPlanner {
    using DefaultLoadPlanner::metadata;
  };
  Probe probe;
  try {
    probe.metadata();
    FAIL("metadata() before set_up() did not throw");
  } catch (const dcpp::CheckpointError& error) {
    REQUIRE(error.kind() == dcpp::ErrorKind::kUsage);
  }
}
