// restore() falls back to the next older step when the newest fails to load (a data file lost,
// a corrupted one), on every rank together; RestoreRequest::fall_back turns that off.

#include "dcpp_test.h"
#include "manager_test_support.h"
#include "rank_threads.h"

#include <dcpp/plugin/checkpoint_manager.h>

namespace fs = std::filesystem;
using dcpp::test::request;
using dcpp::test::TempDir;

namespace {

// Rank `rank`'s shard of the state at `step`: values no other (rank, step) has.
dcpp::StateDict fallback_state(int64_t step, int rank = 0) {
  dcpp::StateDict state;
  state.insert("w" + std::to_string(rank),
               at::arange(2048, at::kDouble) + static_cast<double>(1000 * step + rank));
  state.insert("step", step);
  return state;
}

// What a restore of `manager` loaded: its step, after checking the values bit for bit.
int64_t fallback_restored_step(dcpp::CheckpointManager& manager) {
  dcpp::StateDict state = fallback_state(-1);
  const std::optional<dcpp::CheckpointInfo> info = manager.restore(state);
  REQUIRE(info);
  const int64_t step = state.at("step").value().toInt();
  CHECK(step == info->step);
  CHECK(at::equal(state.at("w0").tensor(), fallback_state(step).at("w0").tensor()));
  return step;
}

void lose_data_files(const fs::path& step_directory) {
  for (const auto& entry : fs::directory_iterator(step_directory)) {
    if (entry.path().extension() == ".distcp") fs::remove(entry.path());
  }
}

}  // namespace

TEST_CASE("a newest step whose data is lost or corrupted is passed over for the one before") {
  TempDir dir;
  const dcpp::CheckpointManagerOptions options =
      dcpp::CheckpointManagerOptions().with_root(dir / "checkpoints").with_async(false);
  {
    dcpp::CheckpointManager manager(options);
    for (int64_t step = 1; step <= 3; ++step) manager.save(fallback_state(step), request(step));
  }
  lose_data_files(dir / "checkpoints" / "step-00000003");
  {
    dcpp::CheckpointManager manager(options);
    dcpp::StateDict state = fallback_state(-1);
    CHECK_THROWS_AS(manager.restore(state, dcpp::RestoreRequest().with_fall_back(false)),
                    dcpp::CheckpointError);
    CHECK(fallback_restored_step(manager) == 2);
    // The saves after it fork from step 2: its own step 3 replaces the broken one.
    CHECK_FALSE(manager.save(fallback_state(3), request(3)).already_saved);
  }
  dcpp::CheckpointManager restarted(options);
  CHECK(fallback_restored_step(restarted) == 3);

  // Every step broken: the error names each, and says the state may be partly loaded.
  for (int64_t step = 1; step <= 3; ++step) {
    lose_data_files(dir / "checkpoints" / dcpp::step_directory_name(step));
  }
  dcpp::StateDict state = fallback_state(-1);
  try {
    restarted.restore(state);
    FAIL("a restore of broken steps succeeded");
  } catch (const dcpp::CheckpointError& error) {
    const std::string what = error.what();
    CHECK_THAT(what, Catch::Contains("step 3:") && Catch::Contains("step 2:") &&
                         Catch::Contains("step 1:") && Catch::Contains("partly loaded"));
  }
}

TEST_CASE("two ranks fall back together when one rank's data of the newest step is lost") {
  TempDir dir;
  const fs::path root = dir / "checkpoints";
  const auto options = [&](const c10::intrusive_ptr<c10d::Store>& store, int rank) {
    return dcpp::CheckpointManagerOptions().with_root(root).with_async(false).with_process_group(
        dcpp::test::loopback_group(store, rank, 2, "fallback"));
  };
  dcpp::test::on_rank_threads(2, [&](int rank, const c10::intrusive_ptr<c10d::Store>& store) {
    dcpp::CheckpointManager manager(options(store, rank));
    for (int64_t step = 1; step <= 2; ++step)
      manager.save(fallback_state(step, rank), request(step));
  });
  fs::remove(root / "step-00000002" / "__1_0.distcp");  // rank 1's file only
  std::vector<int64_t> restored(2, -1);
  std::vector<int> bit_for_bit(2,
                               0);  // not vector<bool>: the ranks write their own elements at once
  dcpp::test::on_rank_threads(2, [&](int rank, const c10::intrusive_ptr<c10d::Store>& store) {
    dcpp::CheckpointManager manager(options(store, rank));
    dcpp::StateDict state = fallback_state(-1, rank);
    const std::optional<dcpp::CheckpointInfo> info = manager.restore(state);
    if (!info) return;
    restored[rank] = info->step;
    const std::string key = "w" + std::to_string(rank);
    bit_for_bit[rank] =
        state.at("step").value().toInt() == info->step &&
        at::equal(state.at(key).tensor(), fallback_state(info->step, rank).at(key).tensor());
  });
  CHECK(restored == std::vector<int64_t>{1, 1});
  CHECK(bit_for_bit == std::vector<int>{1, 1});
}

TEST_CASE("an empty .metadata, what a power loss leaves without fsync, is no complete checkpoint") {
  TempDir dir;
  const dcpp::CheckpointManagerOptions options =
      dcpp::CheckpointManagerOptions().with_root(dir / "checkpoints").with_async(false);
  {
    dcpp::CheckpointManager manager(options);
    for (int64_t step = 1; step <= 2; ++step) manager.save(fallback_state(step), request(step));
  }
  // The manifest survived, `.metadata` did not (sync_files off: neither was fsynced).
  dcpp::test::write_file(dir / "checkpoints" / "step-00000002" / ".metadata", "");
  CHECK(dcpp::test::steps_of(dcpp::list_checkpoints(dir / "checkpoints")) ==
        std::vector<int64_t>{1});
  dcpp::CheckpointManager manager(options);
  CHECK(fallback_restored_step(manager) == 1);
}
