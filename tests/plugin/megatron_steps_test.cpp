// A CheckpointManager with Megatron-LM's step names (StepNames::kMegatronLM): `iter_0000100/` in
// Megatron-Core's layout and `latest_checkpointed_iteration.txt`, which Megatron-LM resumes from;
// and any manager resuming from a save directory Megatron-LM wrote itself.

#include "dcpp_test.h"
#include "manager_test_support.h"

#include <dcpp/checkpoint/checkpointer.h>
#include <dcpp/checkpoint/megatron.h>
#include <dcpp/plugin/checkpoint_manager.h>
#include <dcpp/storage/checkpoint_layout.h>
#include <dcpp/storage/megatron_storage.h>

#include <spdlog/sinks/ringbuffer_sink.h>
#include <spdlog/spdlog.h>

namespace fs = std::filesystem;
using dcpp::test::request;
using dcpp::test::steps_of;
using dcpp::test::TempDir;

namespace {

// What a Megatron-LM job saves at `iteration`: its weights and its common state.
dcpp::StateDict megatron_state(int64_t iteration) {
  dcpp::StateDict state;
  state.insert("decoder.weight", at::arange(12, at::kFloat).reshape({3, 4}).add(iteration));
  dcpp::StateDict common;
  common.insert("iteration", iteration);
  dcpp::megatron::add_common_state(state, std::move(common));
  return state;
}

dcpp::CheckpointManagerOptions megatron_options(const fs::path& root, bool async) {
  return dcpp::CheckpointManagerOptions().with_root(root).with_async(async).with_step_names(
      dcpp::StepNames::kMegatronLM);
}

// The messages the "dcpp" logger (spdlog's registry, shared with the libraries) takes while it
// lives.
class TrackerLogCapture {
 public:
  TrackerLogCapture() {
    logger_ = spdlog::get("dcpp");
    if (!logger_) {
      logger_ = std::make_shared<spdlog::logger>("dcpp");
      spdlog::register_logger(logger_);
    }
    logger_->sinks().push_back(ring_);
  }
  ~TrackerLogCapture() { logger_->sinks().pop_back(); }
  std::string text() const {
    std::string all;
    for (const std::string& line : ring_->last_formatted()) all += line;
    return all;
  }

 private:
  std::shared_ptr<spdlog::logger> logger_;
  std::shared_ptr<spdlog::sinks::ringbuffer_sink_mt> ring_ =
      std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(256);
};

}  // namespace

TEST_CASE("Megatron-LM's step names: iter_NNNNNNN in Megatron's layout and its tracker file") {
  CHECK(dcpp::step_directory_name(100, dcpp::StepNames::kMegatronLM) == "iter_0000100");
  CHECK(dcpp::step_directory_name(123456789, dcpp::StepNames::kMegatronLM) == "iter_123456789");
  CHECK(dcpp::step_directory_name(100, dcpp::StepNames::kDcpp) == "step-00000100");

  for (const bool async : {false, true}) {
    INFO((async ? "async" : "sync"));
    TempDir dir;
    {
      auto options = megatron_options(dir.path(), async);
      options.retention.keep_latest = 1;
      dcpp::CheckpointManager manager(options);
      for (const int64_t step : {100, 200}) {
        manager.save(megatron_state(step), request(step)).committed.wait();
        CHECK(dcpp::test::read_file(dir / dcpp::kMegatronTrackerFile) == std::to_string(step));
      }
      manager.wait();
    }
    CHECK(fs::exists(dir / "iter_0000200" / "metadata.json"));
    CHECK(dcpp::checkpoint_layout(dir / "iter_0000200")->name() == dcpp::kMegatronLayout);
    CHECK_FALSE(fs::exists(dir / "iter_0000100"));  // retention: the latest one only
    CHECK(steps_of(dcpp::list_checkpoints(dir.path())) == std::vector<int64_t>{200});
    CHECK(dcpp::megatron::load_common_state_dict(dir / "iter_0000200")
              .at("iteration")
              .value()
              .toInt() == 200);

    // A later job resumes from it, whatever names it writes.
    dcpp::CheckpointManager next(dcpp::CheckpointManagerOptions().with_root(dir.path()));
    dcpp::StateDict state;
    state.insert("decoder.weight", at::zeros({3, 4}));
    const std::optional<dcpp::CheckpointInfo> restored = next.restore(state);
    REQUIRE(restored);
    CHECK(restored->step == 200);
    CHECK(dcpp::test::bitwise_equal(state.at("decoder.weight").tensor(),
                                    megatron_state(200).at("decoder.weight").tensor()));
  }
}

TEST_CASE("a manager resumes from a save directory Megatron-LM wrote") {
  // Megatron-Core's own checkpoint as Megatron-LM's training loop leaves it: iter_0000100/ and the
  // tracker, no manifest of dcpp's.
  TempDir dir;
  fs::copy(dcpp::test::megatron_fixture("mcore_tp2"), dir / "iter_0000100");
  dcpp::test::write_file(dir / dcpp::kMegatronTrackerFile, "100");
  fs::create_directories(dir / "iter_0000200");  // a save Megatron never committed
  dcpp::test::write_file(dir / "iter_0000200" / ".metadata", "");

  const std::vector<dcpp::CheckpointInfo> steps = dcpp::list_checkpoints(dir.path());
  REQUIRE(steps_of(steps) == std::vector<int64_t>{100});
  CHECK(steps[0].bytes > 0);

  dcpp::StateDict expected;
  expected.insert("embedding.word_embeddings.weight", at::zeros({16, 8}));
  dcpp::load(expected, dir / "iter_0000100");

  dcpp::CheckpointManager manager(megatron_options(dir.path(), false));
  dcpp::StateDict state;
  state.insert("embedding.word_embeddings.weight", at::zeros({16, 8}));
  const std::optional<dcpp::CheckpointInfo> restored = manager.restore(state);
  REQUIRE(restored);
  CHECK(restored->step == 100);
  CHECK(restored->path == dir / "iter_0000100");
  CHECK(dcpp::test::bitwise_equal(state.at("embedding.word_embeddings.weight").tensor(),
                                  expected.at("embedding.word_embeddings.weight").tensor()));

  // The job goes on and saves the next step beside Megatron's, and the tracker follows.
  manager.save(megatron_state(300), request(300)).committed.wait();
  CHECK(dcpp::test::read_file(dir / dcpp::kMegatronTrackerFile) == "300");
  CHECK(steps_of(dcpp::list_checkpoints(dir.path())) == std::vector<int64_t>{100, 300});
}

TEST_CASE("Megatron-LM's step names need Megatron's common state and a root every rank sees") {
  TempDir dir;
  {
    dcpp::CheckpointManager manager(megatron_options(dir.path(), false));
    dcpp::StateDict state;
    state.insert("w", at::ones({2}));
    const dcpp::CheckpointError error =
        dcpp::test::error_of([&] { manager.save(state, request(5)); });
    CHECK_THAT(error.what(), Catch::Contains("dcpp::megatron::add_common_state"));
    CHECK_FALSE(fs::exists(dir / "iter_0000005"));
    CHECK_FALSE(fs::exists(dir / dcpp::kMegatronTrackerFile));
  }
  auto options = megatron_options(dir.path(), false);
  options.node_local_root = true;
  const dcpp::CheckpointError error =
      dcpp::test::error_of([&] { dcpp::CheckpointManager manager(options); });
  CHECK(error.kind() == dcpp::ErrorKind::kUsage);
  CHECK_THAT(error.what(), Catch::Contains("CheckpointManagerOptions::step_names is "
                                           "StepNames::kMegatronLM: Megatron-LM's step names are "
                                           "for a root every rank sees, not a node-local root"));
}

TEST_CASE("a manager honours Megatron-LM's tracker when it names an older complete iteration") {
  TempDir dir;
  {
    dcpp::CheckpointManager manager(megatron_options(dir.path(), false));
    for (const int64_t step : {50, 100}) {
      manager.save(megatron_state(step), request(step)).committed.wait();
    }
    manager.wait();
  }
  REQUIRE(steps_of(dcpp::list_checkpoints(dir.path())) == std::vector<int64_t>{50, 100});
  const auto restore = [&](const std::string& tracker) {
    dcpp::test::write_file(dir / dcpp::kMegatronTrackerFile, tracker);
    dcpp::CheckpointManager manager(megatron_options(dir.path(), false));
    dcpp::StateDict state;
    state.insert("decoder.weight", at::zeros({3, 4}));
    const std::optional<dcpp::CheckpointInfo> restored = manager.restore(state);
    REQUIRE(restored);
    CHECK(dcpp::test::bitwise_equal(state.at("decoder.weight").tensor(),
                                    megatron_state(restored->step).at("decoder.weight").tensor()));
    return restored->step;
  };

  // A manual rollback: the tracker set back to 50. Restored, with a warning naming both.
  {
    const TrackerLogCapture log;
    CHECK(restore("50") == 50);
    CHECK_THAT(log.text(), Catch::Contains("latest_checkpointed_iteration.txt names iteration 50"));
    CHECK_THAT(log.text(), Catch::Contains("older than the newest complete one, 100"));
    CHECK_THAT(log.text(), Catch::Contains("restoring iteration 50"));
  }
  // The tracker naming the newest: no warning.
  {
    const TrackerLogCapture log;
    CHECK(restore("100\n") == 100);
    CHECK_THAT(log.text(), !Catch::Contains("latest_checkpointed_iteration.txt"));
  }
  // Naming an iteration that is missing or incomplete, or none at all: the newest, logged.
  fs::create_directories(dir / "iter_0000070");
  for (const std::string tracker : {"70", "60", "release", "garbage"}) {
    INFO(tracker);
    const TrackerLogCapture log;
    CHECK(restore(tracker) == 100);
    CHECK_THAT(log.text(), Catch::Contains("latest_checkpointed_iteration.txt"));
    CHECK_THAT(log.text(), Catch::Contains("restoring the newest complete iteration, 100"));
  }
  // The saves after a rollback continue from it: the tracker follows them.
  dcpp::test::write_file(dir / dcpp::kMegatronTrackerFile, "50");
  dcpp::CheckpointManager manager(megatron_options(dir.path(), false));
  dcpp::StateDict state = megatron_state(0);
  REQUIRE(manager.restore(state)->step == 50);
  manager.save(megatron_state(60), request(60)).committed.wait();
  manager.wait();
  CHECK(dcpp::test::read_file(dir / dcpp::kMegatronTrackerFile) == "60");
}
