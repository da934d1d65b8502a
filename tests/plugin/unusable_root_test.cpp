// A checkpoint root that cannot be created, on two ranks in one process (threads, a Gloo group
// each, one HashStore): every rank gets one CheckpointError naming the root and the cause, none
// is left waiting in a collective.

#include "dcpp_test.h"

#include <dcpp/checkpoint/checkpointer.h>
#include <dcpp/dist/process_group.h>
#include <dcpp/plugin/checkpoint_manager.h>

#include <torch/csrc/distributed/c10d/HashStore.hpp>

#include <fstream>
#include <functional>
#include <thread>

namespace fs = std::filesystem;
using dcpp::test::TempDir;

namespace {

// What each of `world` ranks threw (empty: nothing, "other: ..." for a non-CheckpointError).
std::vector<std::string> run_ranks(
    int world, const std::function<void(c10::intrusive_ptr<c10d::ProcessGroup>)>& body) {
  auto store = c10::make_intrusive<c10d::HashStore>();
  std::vector<std::string> errors(world);
  std::vector<std::thread> ranks;
  for (int rank = 0; rank < world; ++rank) {
    ranks.emplace_back([&, rank] {
      try {
        // A short timeout: a rank left waiting for a peer fails the test in seconds.
        auto group = dcpp::make_gloo_process_group(
            store, rank, world, dcpp::ProcessGroupOptions().with_timeout(std::chrono::seconds(10)));
        body(group);
      } catch (const dcpp::CheckpointError& e) {
        errors[rank] = e.what();
      } catch (const std::exception& e) {
        errors[rank] = std::string("other: ") + e.what();
      }
    });
  }
  for (auto& r : ranks) r.join();
  return errors;
}

// What each of two ranks threw constructing a manager on `root`.
std::vector<std::string> manager_errors(const fs::path& root) {
  return run_ranks(2, [&](c10::intrusive_ptr<c10d::ProcessGroup> group) {
    dcpp::CheckpointManagerOptions options;
    options.root = root;
    options.ranks.process_group = std::move(group);
    options.async = false;  // an async manager needs a second group: beside the point here
    dcpp::CheckpointManager manager(options);
  });
}

}  // namespace

TEST_CASE("a manager root that is a file fails on every rank with a CheckpointError naming it") {
  TempDir dir;
  const fs::path root = dir / "taken";
  std::ofstream(root) << "user data";
  const auto errors = manager_errors(root);
  for (int rank = 0; rank < 2; ++rank) {
    INFO("rank " << rank << ": " << errors[rank]);
    CHECK(errors[rank].find("checkpoint root '" + root.string() + "'") != std::string::npos);
    CHECK(errors[rank].find("rank 0") != std::string::npos);
    CHECK(errors[rank].find("exists and is not a directory") != std::string::npos);
  }
  // Nothing of the file was touched.
  std::ifstream in(root);
  CHECK(std::string(std::istreambuf_iterator<char>(in), {}) == "user data");
}

TEST_CASE("a manager root below a file fails on every rank with a CheckpointError naming it") {
  TempDir dir;
  std::ofstream(dir / "file") << "x";
  const fs::path root = dir / "file" / "checkpoints";
  const auto errors = manager_errors(root);
  for (int rank = 0; rank < 2; ++rank) {
    INFO("rank " << rank << ": " << errors[rank]);
    CHECK(errors[rank].find("checkpoint root '" + root.string() + "'") != std::string::npos);
    CHECK(errors[rank].find("Not a directory") != std::string::npos);
  }
}

TEST_CASE("a save into a directory below a file fails on every rank with a CheckpointError") {
  TempDir dir;
  std::ofstream(dir / "file") << "x";
  const fs::path path = dir / "file" / "step-1";
  const auto errors = run_ranks(2, [&](c10::intrusive_ptr<c10d::ProcessGroup> group) {
    dcpp::StateDict state;
    state.insert("w", at::arange(4, at::kFloat));
    dcpp::SaveOptions options;
    options.ranks.process_group = std::move(group);
    dcpp::save(state, path, options);
  });
  for (int rank = 0; rank < 2; ++rank) {
    INFO("rank " << rank << ": " << errors[rank]);
    CHECK(errors[rank].find(path.string()) != std::string::npos);
    CHECK(errors[rank].find("Not a directory") != std::string::npos);
    CHECK(errors[rank].rfind("other: ", 0) == std::string::npos);
  }
}

TEST_CASE("an s3:// manager root is refused, naming it, before anything is created") {
  TempDir dir;
  const fs::path before = fs::current_path();
  fs::current_path(dir.path());
  dcpp::CheckpointManagerOptions options;
  options.root = "s3://bucket/run";
  try {
    dcpp::CheckpointManager manager(options);
    FAIL("an s3:// root was accepted");
  } catch (const dcpp::CheckpointError& error) {
    CHECK(error.kind() == dcpp::ErrorKind::kUsage);
    CHECK_THAT(std::string(error.what()), Catch::Contains("s3://bucket/run"));
    CHECK_THAT(std::string(error.what()), Catch::Contains("CheckpointManagerOptions::remote"));
  }
  CHECK(fs::is_empty(dir.path()));  // no local directory named "s3:"
  fs::current_path(before);
}

TEST_CASE("a root that is not shared by every rank (node-local disks) fails on every rank") {
  // Each rank's root is a directory of its own, as each host's own disk would be.
  TempDir dir;
  const auto errors = run_ranks(2, [&](c10::intrusive_ptr<c10d::ProcessGroup> group) {
    dcpp::CheckpointManagerOptions options;
    options.root = dir / ("host-" + std::to_string(group->getRank())) / "checkpoints";
    options.ranks.process_group = std::move(group);
    options.async = false;
    dcpp::CheckpointManager manager(options);
  });
  for (int rank = 0; rank < 2; ++rank) {
    INFO("rank " << rank << ": " << errors[rank]);
    CHECK(errors[rank].find("is not one directory that every rank sees") != std::string::npos);
    CHECK(errors[rank].find("rank 1: on host") != std::string::npos);
    CHECK(errors[rank].find("rank 0:") == std::string::npos);  // the coordinator sees its file
  }
  // The coordinator's probe is gone.
  for (const auto& entry : fs::recursive_directory_iterator(dir.path())) {
    CHECK(entry.path().filename().string().rfind(".dcpp-root-probe-", 0) == std::string::npos);
  }
}

TEST_CASE("a save that would fill the root's disk fails on every rank before writing anything") {
  TempDir dir;
  const fs::path root = dir / "checkpoints";
  std::vector<int> saved_steps(2, 0);
  const auto errors = run_ranks(2, [&](c10::intrusive_ptr<c10d::ProcessGroup> group) {
    const int rank = group->getRank();
    dcpp::CheckpointManagerOptions options;
    options.root = root;
    options.ranks.process_group = std::move(group);
    options.async = false;
    dcpp::StateDict state;
    state.insert("w" + std::to_string(rank), at::full({256, 256}, static_cast<double>(rank)));
    dcpp::SaveRequest first;
    first.step = 1;
    {
      dcpp::CheckpointManager manager(options);
      manager.save(state, first);
      saved_steps[rank] = 1;
    }
    // Keep more free than the disk has: the next step cannot fit.
    options.reserved_disk_bytes = fs::space(root).available + (uint64_t{1} << 30);
    dcpp::CheckpointManager manager(options);
    dcpp::SaveRequest second;
    second.step = 2;
    manager.save(state, second);
    saved_steps[rank] = 2;
  });
  for (int rank = 0; rank < 2; ++rank) {
    INFO("rank " << rank << ": " << errors[rank]);
    CHECK(saved_steps[rank] == 1);
    CHECK(errors[rank].find("would fill the disk") != std::string::npos);
    CHECK(errors[rank].find("reserved_disk_bytes") != std::string::npos);
  }
  CHECK_FALSE(fs::exists(root / "step-00000002"));
  // No byte of step 2 was written (a rank may have made its empty temporary directory, which
  // the next manager on the root removes).
  const fs::path temporary = root / "step-00000002.incomplete";
  if (fs::exists(temporary)) CHECK(fs::is_empty(temporary));
  CHECK(fs::exists(root / "step-00000001" / ".metadata"));
}
