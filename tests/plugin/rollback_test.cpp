// Rollbacks: a run that resumes from an older step forks a new generation (checkpoint_lineage.h),
// and the tiers compare saves by identity, not by step number. Its steps replace the abandoned
// run's namesakes, locally and remotely; a resume never takes an abandoned step, and the abandoned
// ones are deleted once the new run has passed them. Against the real S3 server for the remote.

#include "dcpp_test.h"
#include "manager_test_support.h"
#include "storage/s3_test_server.h"

#include <dcpp/plugin/checkpoint_manager.h>

#include <map>

namespace fs = std::filesystem;
using dcpp::test::request;
using dcpp::test::S3TestServer;
using dcpp::test::steps_of;
using dcpp::test::TempDir;

namespace {

// A state whose values say which run saved which step.
dcpp::StateDict rollback_state(int64_t step, int run) {
  dcpp::StateDict state;
  state.insert("w", at::full({16, 16}, static_cast<double>(100 * run + step)));
  state.insert("step", step);
  return state;
}

dcpp::StateDict rollback_target() { return rollback_state(-1, 0); }

// The run whose save `state` holds (100 * run + step): 1 or 2.
int run_of(const dcpp::StateDict& state) {
  const double value = state.at("w").tensor()[0][0].item<double>();
  return static_cast<int>(value - static_cast<double>(state.at("step").value().toInt())) / 100;
}

struct RollbackTiers {
  S3TestServer& server = S3TestServer::get();
  TempDir dir;
  fs::path root = dir / "checkpoints";
  std::string url = "s3://" + server.create_bucket("rollback") + "/run";

  dcpp::CheckpointManagerOptions options(int keep_local) const {
    return dcpp::CheckpointManagerOptions()
        .with_root(root)
        .with_async(false)
        .with_retention(dcpp::RetentionPolicy().with_keep_latest(keep_local))
        .with_remote(dcpp::RemoteTierOptions().with_url(url).with_s3(server.options()));
  }
};

// The step and the run of what `manager` resumes from now.
std::pair<int64_t, int> resumed(dcpp::CheckpointManager& manager,
                                const dcpp::RestoreRequest& which = {}) {
  dcpp::StateDict state = rollback_target();
  const std::optional<dcpp::CheckpointInfo> info = manager.restore(state, which);
  REQUIRE(info);
  CHECK(state.at("step").value().toInt() == info->step);
  return {info->step, run_of(state)};
}

}  // namespace

TEST_CASE("a rollback on a clean root drains the new run's steps and a restart resumes from them") {
  RollbackTiers tiers;
  {  // Run 1: steps 8 to 12, drained; one step kept locally.
    dcpp::CheckpointManager manager(tiers.options(1));
    for (int64_t step = 8; step <= 12; ++step) manager.save(rollback_state(step, 1), request(step));
    manager.wait_for_remote();
    REQUIRE(steps_of(manager.list_remote()) == std::vector<int64_t>{8, 9, 10, 11, 12});
  }
  fs::remove_all(tiers.root);
  {  // Run 2 rolls back to step 8 on a clean root and trains on to step 10.
    dcpp::CheckpointManager manager(tiers.options(1));
    CHECK(resumed(manager, dcpp::RestoreRequest().with_step(8)) == std::make_pair(int64_t{8}, 1));
    for (int64_t step = 9; step <= 10; ++step) {
      const dcpp::ManagedSave save = manager.save(rollback_state(step, 2), request(step));
      CHECK_FALSE(save.already_saved);
    }
    manager.wait_for_remote();
    // Steps 9 and 10 are run 2's on the store; 11 and 12 are run 1's, abandoned, not yet passed.
    for (const dcpp::CheckpointInfo& info : manager.list_remote()) {
      INFO("remote step " << info.step);
      CHECK(info.generation == (info.step == 9 || info.step == 10 ? 1 : 0));
    }
    CHECK(steps_of(manager.list()) == std::vector<int64_t>{10});
    REQUIRE(manager.latest());
    CHECK(manager.latest()->step == 10);
  }
  fs::remove_all(tiers.root);  // a restart on another host
  dcpp::CheckpointManager manager(tiers.options(1));
  CHECK(resumed(manager) == std::make_pair(int64_t{10}, 2));
  CHECK(resumed(manager, dcpp::RestoreRequest().with_step(9)) == std::make_pair(int64_t{9}, 2));
  // An abandoned step asked for by number is still there until the new run passes it.
  CHECK(resumed(manager, dcpp::RestoreRequest().with_step(12)) == std::make_pair(int64_t{12}, 1));

  // Resuming from 10 again is no fork (nothing newer is resumable); run 2 goes on past 12.
  CHECK(resumed(manager) == std::make_pair(int64_t{10}, 2));
  for (int64_t step = 11; step <= 13; ++step) {
    CHECK_FALSE(manager.save(rollback_state(step, 2), request(step)).already_saved);
  }
  manager.wait_for_remote();
  const std::vector<dcpp::CheckpointInfo> remote = manager.list_remote();
  CHECK(steps_of(remote) == std::vector<int64_t>{8, 9, 10, 11, 12, 13});
  for (const dcpp::CheckpointInfo& info : remote) {
    INFO("remote step " << info.step);
    CHECK(info.generation == (info.step == 8 ? 0 : 1));
  }
  CHECK(resumed(manager, dcpp::RestoreRequest().with_step(12)) == std::make_pair(int64_t{12}, 2));
}

TEST_CASE("a rollback in a local root replaces the abandoned steps as the new run reaches them") {
  TempDir dir;
  const dcpp::CheckpointManagerOptions options =
      dcpp::CheckpointManagerOptions().with_root(dir / "checkpoints").with_async(false);
  {
    dcpp::CheckpointManager manager(options);
    for (int64_t step = 1; step <= 5; ++step) manager.save(rollback_state(step, 1), request(step));
  }
  {
    dcpp::CheckpointManager manager(options);
    CHECK(resumed(manager, dcpp::RestoreRequest().with_step(2)) == std::make_pair(int64_t{2}, 1));
    // Step 3 exists, but of the run this one abandons: the save replaces it.
    CHECK_FALSE(manager.save(rollback_state(3, 2), request(3)).already_saved);
    CHECK(steps_of(manager.list()) == std::vector<int64_t>{1, 2, 3, 4, 5});
    REQUIRE(manager.latest());
    CHECK(manager.latest()->step == 3);                                   // 4 and 5 are abandoned
    CHECK(manager.save(rollback_state(3, 2), request(3)).already_saved);  // this run's own step 3
  }
  dcpp::CheckpointManager restarted(options);
  CHECK(resumed(restarted) == std::make_pair(int64_t{3}, 2));
  CHECK_FALSE(restarted.save(rollback_state(4, 2), request(4)).already_saved);
  const std::vector<dcpp::CheckpointInfo> local = restarted.list();
  CHECK(steps_of(local) == std::vector<int64_t>{1, 2, 3, 4, 5});
  CHECK(resumed(restarted) == std::make_pair(int64_t{4}, 2));
  CHECK_FALSE(restarted.save(rollback_state(5, 2), request(5)).already_saved);
  CHECK(resumed(restarted) == std::make_pair(int64_t{5}, 2));
  CHECK(resumed(restarted, dcpp::RestoreRequest().with_step(3)) == std::make_pair(int64_t{3}, 2));
}

TEST_CASE("a restore that fails forks nothing: the newer steps stay resumable") {
  TempDir dir;
  const dcpp::CheckpointManagerOptions options =
      dcpp::CheckpointManagerOptions().with_root(dir / "checkpoints").with_async(false);
  {
    dcpp::CheckpointManager manager(options);
    for (int64_t step = 1; step <= 5; ++step) manager.save(rollback_state(step, 1), request(step));
  }
  dcpp::CheckpointManager manager(options);
  dcpp::StateDict target = rollback_target();
  target.insert("not_saved", at::zeros({2}));  // the load fails: the checkpoint lacks it
  CHECK_THROWS_AS(manager.restore(target, dcpp::RestoreRequest().with_step(2)),
                  dcpp::CheckpointError);
  // Training went on from scratch: its step 3 does not replace the run's step 3.
  CHECK(manager.save(rollback_state(3, 2), request(3)).already_saved);
  REQUIRE(manager.latest());
  CHECK(manager.latest()->step == 5);
  CHECK(resumed(manager, dcpp::RestoreRequest().with_step(3)) == std::make_pair(int64_t{3}, 1));
}
