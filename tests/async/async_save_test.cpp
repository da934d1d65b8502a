// async_save: the checkpoint holds the values at save time although every tensor changes while it
// is uploaded; errors travel in the futures; the in-flight policies; destruction mid-save.

#include "dcpp_test.h"

#include "async_test_util.h"

#include <dcpp/async/async_checkpointer.h>
#include <dcpp/async/blocking_stager.h>
#include <dcpp/async/tbb_stager.h>
#include <dcpp/checkpoint/checkpointer.h>
#include <dcpp/storage/filesystem_writer.h>

#include <filesystem>
#include <thread>

using dcpp::test::Gate;
using dcpp::test::GatedWriter;

namespace {

std::shared_ptr<dcpp::AsyncStager> stager_named(const std::string& name) {
  if (name == "tbb") {
    dcpp::TbbStagerOptions options;
    options.concurrency = 2;
    options.piece_bytes = 64 << 10;
    return dcpp::make_tbb_stager(options);
  }
  dcpp::BlockingStagerOptions options;
  options.piece_bytes = 64 << 10;
  return dcpp::make_blocking_stager(options);
}

dcpp::AsyncCheckpointerOptions options_with(
    std::shared_ptr<dcpp::AsyncStager> stager,
    dcpp::InFlightPolicy policy = dcpp::InFlightPolicy::kWait) {
  dcpp::AsyncCheckpointerOptions options;
  options.stager = std::move(stager);
  options.in_flight_policy = policy;
  options.file_system.sync_files = false;
  return options;
}

std::shared_ptr<GatedWriter> gated_writer(const std::filesystem::path& directory,
                                          std::shared_ptr<Gate> release) {
  dcpp::FileSystemWriterOptions options;
  options.sync_files = false;
  return std::make_shared<GatedWriter>(std::make_unique<dcpp::FileSystemWriter>(directory, options),
                                       std::move(release));
}

void check_holds(const std::filesystem::path& directory,
                 const std::map<std::string, at::Tensor>& expected, int64_t count) {
  std::map<std::string, at::Tensor> saved = dcpp::test::load_tensors(directory.string());
  for (const auto& [key, tensor] : expected) {
    INFO("key " << key);
    REQUIRE(saved.count(key) == 1);
    CHECK(dcpp::test::bitwise_equal(saved.at(key), tensor));
  }
  dcpp::StateDict values = dcpp::load_from_keys(directory, {"counter"});
  CHECK(values.at("counter").dict().at("count").value().toInt() == count);
}

}  // namespace

TEST_CASE("a checkpoint holds the values at save time though every tensor changes during upload") {
  for (const std::string name : {"blocking", "tbb"}) {
    INFO("stager " << name);
    dcpp::test::TempDir dir;
    dcpp::AsyncCheckpointer checkpointer(options_with(stager_named(name)));
    dcpp::test::MixedState state(7);
    // Three saves in a row, into the same buffers: each must hold its own save-time values.
    for (int round = 0; round < 3; ++round) {
      const std::map<std::string, at::Tensor> expected = state.expected_tensors();
      const int64_t count = state.counter->count;
      auto release = std::make_shared<Gate>();
      auto writer = gated_writer(dir / std::to_string(round), release);

      dcpp::AsyncSaveResponse response = checkpointer.async_save(state.state, writer);
      response.staged.wait();
      writer->entered.wait();  // the upload is held at the gate, about to read the staged bytes
      state.mutate_everything();
      const std::map<std::string, at::Tensor> mutated = state.expected_tensors();
      for (const auto& [key, tensor] : expected) {  // every tensor really changed under the upload
        INFO("key " << key);
        REQUIRE_FALSE(dcpp::test::bitwise_equal(mutated.at(key), tensor));
      }
      REQUIRE(state.counter->count != count);
      release->open();
      response.committed.wait();

      check_holds(dir / std::to_string(round), expected, count);
      CHECK(!checkpointer.in_flight());
    }
  }
}

TEST_CASE("a failing writer's error rethrows from the upload future's wait") {
  dcpp::AsyncCheckpointer checkpointer(options_with(stager_named("tbb")));
  dcpp::test::MixedState state(1);
  dcpp::AsyncSaveResponse response =
      checkpointer.async_save(state.state, std::make_shared<dcpp::test::FailingWriter>());
  response.staged.wait();  // staging itself succeeded
  CHECK_THROWS_WITH(response.committed.wait(), Catch::Contains("disk on fire"));
  CHECK_THROWS_AS(response.committed.wait(), dcpp::CheckpointError);  // again: same error
  CHECK(response.committed.error() != nullptr);

  // The checkpointer goes on: the next save succeeds.
  dcpp::test::TempDir dir;
  checkpointer.async_save(state.state, dir / "ok").committed.wait();
  check_holds(dir / "ok", state.expected_tensors(), state.counter->count);
}

TEST_CASE("a staging error fails both futures, naming the key, and nothing is written") {
  struct Broken : dcpp::Stateful {
    dcpp::StateDict state_dict() override { throw std::runtime_error("no state today"); }
    void load_state_dict(const dcpp::StateDict&) override {}
  };
  for (const std::string name : {"blocking", "tbb"}) {
    INFO("stager " << name);
    dcpp::test::TempDir dir;
    dcpp::AsyncCheckpointer checkpointer(options_with(stager_named(name)));
    dcpp::StateDict state;
    state.insert("fine", at::ones({3}));
    dcpp::StateDict inner;
    inner.insert("broken", std::make_shared<Broken>());
    state.insert("outer", inner);
    dcpp::AsyncSaveResponse response = checkpointer.async_save(state, dir / "ckpt");
    CHECK_THROWS_WITH(response.staged.wait(),
                      Catch::Contains("outer.broken") && Catch::Contains("no state today"));
    CHECK_THROWS_WITH(response.committed.wait(), Catch::Contains("no state today"));
    CHECK(!std::filesystem::exists(dir / "ckpt" / ".metadata"));
  }
}

TEST_CASE("InFlightPolicy kFail refuses a second save while one is in flight") {
  dcpp::test::TempDir dir;
  dcpp::AsyncCheckpointer checkpointer(
      options_with(stager_named("tbb"), dcpp::InFlightPolicy::kFail));
  dcpp::test::MixedState state(2);
  auto release = std::make_shared<Gate>();
  auto first = checkpointer.async_save(state.state, gated_writer(dir / "first", release),
                                       "the first save's place");
  CHECK(checkpointer.in_flight());
  CHECK_THROWS_WITH(checkpointer.async_save(state.state, dir / "second"),
                    Catch::Contains("still in flight"));
  // A writer's save is named by what its caller said.
  CHECK_THROWS_WITH(checkpointer.async_save(state.state, dir / "second"),
                    Catch::Contains("the save to the first save's place is still in flight"));
  release->open();
  first.committed.wait();
  CHECK(!std::filesystem::exists(dir / "second" / ".metadata"));
  // Once the first is done, the next is accepted.
  checkpointer.async_save(state.state, dir / "third").committed.wait();
  check_holds(dir / "third", state.expected_tensors(), state.counter->count);
}

TEST_CASE("InFlightPolicy kSkip returns a skipped response and writes nothing") {
  dcpp::test::TempDir dir;
  dcpp::AsyncCheckpointer checkpointer(
      options_with(stager_named("blocking"), dcpp::InFlightPolicy::kSkip));
  dcpp::test::MixedState state(3);
  const auto expected = state.expected_tensors();
  auto release = std::make_shared<Gate>();
  auto first = checkpointer.async_save(state.state, gated_writer(dir / "first", release));
  first.staged.wait();
  dcpp::AsyncSaveResponse skipped = checkpointer.async_save(state.state, dir / "second");
  CHECK(skipped.skipped);
  CHECK(skipped.staged.is_ready());
  CHECK(skipped.committed.is_ready());
  CHECK_NOTHROW(skipped.committed.wait());
  CHECK(!first.skipped);
  CHECK(!first.committed.is_ready());
  release->open();
  first.committed.wait();
  CHECK(!std::filesystem::exists(dir / "second"));
  check_holds(dir / "first", expected, 3);
}

TEST_CASE("InFlightPolicy kWait returns only after the previous upload completed") {
  dcpp::test::TempDir dir;
  dcpp::AsyncCheckpointer checkpointer(options_with(stager_named("tbb")));
  dcpp::test::MixedState state(4);
  const auto expected_first = state.expected_tensors();
  auto release = std::make_shared<Gate>();
  auto first_writer = gated_writer(dir / "first", release);
  auto first = checkpointer.async_save(state.state, first_writer);
  first.staged.wait();
  first_writer->entered.wait();  // the first upload is held at the gate

  bool first_done_when_second_returned = false;
  dcpp::AsyncSaveResponse second;
  std::thread saver([&] {
    second = checkpointer.async_save(state.state, dir / "second");
    first_done_when_second_returned = first.committed.is_ready();
  });
  release->open();
  saver.join();
  CHECK(first_done_when_second_returned);
  first.committed.wait();
  second.committed.wait();
  check_holds(dir / "first", expected_first, 4);
  check_holds(dir / "second", state.expected_tensors(), 4);
}

TEST_CASE("destroying the checkpointer with a save in flight finishes that save") {
  dcpp::test::TempDir dir;
  dcpp::test::MixedState state(5);
  const auto expected = state.expected_tensors();
  auto release = std::make_shared<Gate>();
  dcpp::AsyncSaveResponse response;
  std::thread opener;
  {
    dcpp::AsyncCheckpointer checkpointer(options_with(stager_named("tbb")));
    auto writer = gated_writer(dir / "ckpt", release);
    response = checkpointer.async_save(state.state, writer);
    writer->entered.wait();  // the upload has started and is held
    CHECK(!response.committed.is_ready());
    opener = std::thread([release] { release->open(); });
  }  // the destructor waits for the upload
  opener.join();
  CHECK(response.committed.is_ready());
  response.committed.wait();
  check_holds(dir / "ckpt", expected, 5);

  // A failing save in flight: the destructor neither throws nor loses the error.
  dcpp::AsyncSaveResponse failed;
  {
    dcpp::AsyncCheckpointer checkpointer(options_with(stager_named("tbb")));
    failed = checkpointer.async_save(state.state, std::make_shared<dcpp::test::FailingWriter>());
  }
  CHECK_THROWS_WITH(failed.committed.wait(), Catch::Contains("disk on fire"));
}

// 0.1's names, which still work until 0.3.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
TEST_CASE("staging_completion and upload_completion are staged and committed, deprecated") {
  dcpp::test::TempDir dir;
  dcpp::AsyncCheckpointer checkpointer(options_with(stager_named("tbb")));
  dcpp::test::MixedState state(2);
  const dcpp::AsyncSaveResponse response = checkpointer.async_save(state.state, dir / "ckpt");
  response.staging_completion.wait();
  CHECK(response.staged.is_ready());
  const dcpp::Metadata& metadata = response.upload_completion.get();
  CHECK(&metadata == &response.committed.get());  // one future under two names
  CHECK(response.upload_completion.is_ready());
  const dcpp::Future<dcpp::Metadata> as_future = response.upload_completion;
  CHECK(&as_future.get() == &metadata);
  check_holds(dir / "ckpt", state.expected_tensors(), 2);
}
#pragma GCC diagnostic pop
