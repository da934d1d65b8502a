// CheckpointError::kind() on one process: each kind of failure a program may react to differently
// (docs/reliability.md, "Error messages"). Multi-rank kinds: tests/reshard/reshard_test.cpp; an
// unwritable directory: tests/reliability/faults/faults_test.cpp.

#include "dcpp_test.h"

#include <dcpp/checkpoint/checkpointer.h>
#include <dcpp/core/checkpoint_error.h>
#include <dcpp/state_dict/stateful.h>

#include <functional>
#include <optional>

namespace fs = std::filesystem;
using dcpp::ErrorKind;
using dcpp::StateDict;

namespace {

// The kind of the CheckpointError `action` throws; none when it throws nothing.
std::optional<ErrorKind> kind_thrown_by(const std::function<void()>& action) {
  try {
    action();
  } catch (const dcpp::CheckpointError& error) {
    INFO(error.what());
    return error.kind();
  }
  return std::nullopt;
}

StateDict sample() {
  StateDict state;
  state.insert("w", at::arange(64, at::kFloat));
  state.insert("step", 3);
  return state;
}

}  // namespace

TEST_CASE("every ErrorKind has a name") {
  CHECK(std::string(dcpp::to_string(ErrorKind::kNotFound)) == "not found");
  CHECK(std::string(dcpp::to_string(ErrorKind::kCorrupt)) == "corrupt");
  CHECK(std::string(dcpp::to_string(ErrorKind::kIncompatible)) == "incompatible");
  CHECK(std::string(dcpp::to_string(ErrorKind::kRankFailed)) == "rank failed");
  CHECK(std::string(dcpp::to_string(ErrorKind::kIo)) == "I/O");
  CHECK(std::string(dcpp::to_string(ErrorKind::kUsage)) == "usage");
  const dcpp::CheckpointError error(ErrorKind::kIo, "disk on fire");
  CHECK(error.kind() == ErrorKind::kIo);
  CHECK(std::string(error.what()).find("disk on fire") == 0);
}

TEST_CASE("loading from a checkpoint directory that does not exist is kNotFound") {
  dcpp::test::TempDir dir;
  StateDict target = sample();
  CHECK(kind_thrown_by([&] { dcpp::load(target, dir / "never-saved"); }) == ErrorKind::kNotFound);
  CHECK(kind_thrown_by([&] { dcpp::read_metadata(dir / "never-saved"); }) == ErrorKind::kNotFound);
}

TEST_CASE("a missing data file is kNotFound") {
  dcpp::test::TempDir dir;
  dcpp::save(sample(), dir.path());
  fs::remove(dir / "__0_0.distcp");
  StateDict target = sample();
  CHECK(kind_thrown_by([&] { dcpp::load(target, dir.path()); }) == ErrorKind::kNotFound);
}

TEST_CASE("a flipped byte in a data file is kCorrupt") {
  dcpp::test::TempDir dir;
  dcpp::save(sample(), dir.path());
  const std::string data = dcpp::test::read_file(dir / "__0_0.distcp");
  for (const auto& [index, info] : dcpp::read_metadata(dir.path()).storage_data) {
    INFO("key " << index.fqn);
    std::string damaged = data;
    damaged.at(static_cast<std::size_t>(info.offset + info.length / 2)) ^= 0x10;
    dcpp::test::write_file(dir / "__0_0.distcp", damaged);
    StateDict target = sample();
    CHECK(kind_thrown_by([&] { dcpp::load(target, dir.path()); }) == ErrorKind::kCorrupt);
  }
}

TEST_CASE("a checkpoint that does not fit the state dict is kIncompatible") {
  dcpp::test::TempDir dir;
  dcpp::save(sample(), dir.path());
  SECTION("a dtype mismatch") {
    StateDict target;
    target.insert("w", at::zeros({64}, at::kDouble));
    CHECK(kind_thrown_by([&] { dcpp::load(target, dir.path()); }) == ErrorKind::kIncompatible);
  }
  SECTION("a shape mismatch") {
    StateDict target;
    target.insert("w", at::zeros({65}, at::kFloat));
    CHECK(kind_thrown_by([&] { dcpp::load(target, dir.path()); }) == ErrorKind::kIncompatible);
  }
  SECTION("a key the checkpoint lacks") {
    StateDict target = sample();
    target.insert("missing", at::zeros({2}));
    CHECK(kind_thrown_by([&] { dcpp::load(target, dir.path()); }) == ErrorKind::kIncompatible);
  }
}

TEST_CASE("breaking a precondition is kUsage") {
  StateDict state = sample();
  CHECK(kind_thrown_by([&] { state.insert("w", at::zeros({1})); }) == ErrorKind::kUsage);
  dcpp::test::TempDir dir;
  dcpp::save(state, dir.path());
  CHECK(kind_thrown_by([&] { dcpp::save(state, dir.path()); }) ==
        ErrorKind::kUsage);  // the directory already holds a checkpoint
}

TEST_CASE("a user's exception in a Stateful becomes a kUsage CheckpointError keeping its message") {
  struct Failing : dcpp::Stateful {
    StateDict state_dict() override { throw std::runtime_error("the user's state is not ready"); }
    void load_state_dict(const StateDict&) override {}
  };
  StateDict state;
  state.insert("app", std::make_shared<Failing>());
  dcpp::test::TempDir dir;
  try {
    dcpp::save(state, dir.path());
    FAIL("the save succeeded");
  } catch (const dcpp::CheckpointError& error) {
    CHECK(error.kind() == ErrorKind::kUsage);
    CHECK(std::string(error.what()).find("the user's state is not ready") != std::string::npos);
  }
}

TEST_CASE("a file the OS refuses to open is kIo") {
  dcpp::test::TempDir dir;
  dcpp::save(sample(), dir.path());
  // A directory where the data file was: opening it fails (EISDIR), even for root.
  fs::remove(dir / "__0_0.distcp");
  fs::create_directory(dir / "__0_0.distcp");
  StateDict target = sample();
  CHECK(kind_thrown_by([&] { dcpp::load(target, dir.path()); }) == ErrorKind::kIo);
}
