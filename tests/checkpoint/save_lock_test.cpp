// A save owns its directory (issue 58): a second save into a directory while one is in progress is
// refused on every rank of its group before any of them writes, naming the directory, the holder
// and the fix; a holder that was killed blocks nothing; a save without collectives locks per rank.
// Ranks are threads of this process (rank_threads.h); the killed holder is a forked process.

#include "dcpp_test.h"
#include "rank_threads.h"

#include "filesystem/save_lock.h"
#include "storage/dcp_file_names.h"

#include <dcpp/checkpoint/checkpointer.h>
#include <dcpp/storage/filesystem_writer.h>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <mutex>
#include <set>
#include <thread>

namespace fs = std::filesystem;
using dcpp::test::loopback_group;
using dcpp::test::on_rank_threads;
using dcpp::test::TempDir;

namespace {

constexpr int64_t kLockTestElements = 64;  // per rank

// What rank `rank` of a `ranks`-rank group holds of a checkpoint whose values depend on `seed`.
dcpp::StateDict lock_test_state(int seed, int rank, int ranks) {
  const at::Tensor mine = at::arange(kLockTestElements, at::kFloat).add(seed * 1000 + rank * 100);
  dcpp::StateDict sd;
  sd.insert("weight",
            dcpp::ShardedTensor({ranks * kLockTestElements}, {{mine, {rank * kLockTestElements}}}));
  sd.insert("seed", static_cast<int64_t>(seed));
  return sd;
}

// The whole tensor the ranks of lock_test_state(seed, *, ranks) saved.
at::Tensor lock_test_whole(int seed, int ranks) {
  std::vector<at::Tensor> parts;
  for (int rank = 0; rank < ranks; ++rank) {
    parts.push_back(at::arange(kLockTestElements, at::kFloat).add(seed * 1000 + rank * 100));
  }
  return at::cat(parts);
}

// Loads `dir` in one process: the weight (bit for bit against lock_test_whole) and the seed.
std::pair<at::Tensor, int64_t> lock_test_load(const fs::path& dir, int ranks) {
  dcpp::StateDict target;
  target.insert("weight", at::zeros({ranks * kLockTestElements}, at::kFloat));
  target.insert("seed", static_cast<int64_t>(-1));
  dcpp::load(target, dir);
  return {target.at("weight").tensor(), target.at("seed").value().toInt()};
}

std::set<std::string> lock_test_files(const fs::path& dir) {
  std::set<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir))
    names.insert(entry.path().filename().string());
  return names;
}

dcpp::FileSystemWriterOptions unsynced() {
  return dcpp::FileSystemWriterOptions().with_sync_files(false);
}

const char* const kRefusal = "another save is writing there";
const char* const kFix =
    "use one checkpoint group that covers every rank (the world), or a directory per group";

// One-way signals between the rank threads of two groups.
class LockTestSignals {
 public:
  void raise(int& flag) {
    const std::lock_guard<std::mutex> guard(mutex_);
    ++flag;
    changed_.notify_all();
  }
  // Waits until `flag` reaches `count`; false after a minute (the test then fails, not hangs).
  bool wait(const int& flag, int count) {
    std::unique_lock<std::mutex> guard(mutex_);
    return changed_.wait_for(guard, std::chrono::minutes(1), [&] { return flag >= count; });
  }

  int first_group_holds = 0;      // raised by the first group's coordinator once set up
  int second_group_finished = 0;  // raised by each rank of the second group when its save ended

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
};

// The first group's writer: once its coordinator is set up (holding the directory) the second
// group may start; it writes only once the second group's save has ended, so both saves are in
// progress at once, whatever the scheduling.
class HoldingWriter final : public dcpp::FileSystemWriter {
 public:
  HoldingWriter(const fs::path& dir, LockTestSignals& signals)
      : FileSystemWriter(dir, unsynced()), signals_(signals) {}
  void set_up(int rank, bool is_coordinator) override {
    FileSystemWriter::set_up(rank, is_coordinator);
    if (is_coordinator) signals_.raise(signals_.first_group_holds);
  }
  std::vector<dcpp::WriteResult> write_data(const dcpp::SavePlan& plan,
                                            dcpp::SavePlanner& planner) override {
    if (!signals_.wait(signals_.second_group_finished, 2)) {
      throw dcpp::CheckpointError(dcpp::ErrorKind::kUsage, "the second group never finished");
    }
    return FileSystemWriter::write_data(plan, planner);
  }

 private:
  LockTestSignals& signals_;
};

// Each rank's outcome: "" when its save returned, else its error (and kind).
struct LockTestOutcome {
  std::string error;
  dcpp::ErrorKind kind = dcpp::ErrorKind::kIo;
};

}  // namespace

TEST_CASE("a save into a directory another save holds is refused, naming the holder and the fix") {
  TempDir dir;
  dcpp::FileSystemWriter holder(dir.path(), unsynced());
  holder.set_up(0, /*is_coordinator=*/true);  // a save in progress, of this process
  REQUIRE(fs::exists(dir / dcpp::detail::kSaveLockFileName));

  const dcpp::CheckpointError error =
      dcpp::test::error_of([&] { dcpp::save(lock_test_state(1, 0, 1), dir.path()); });
  CHECK(error.kind() == dcpp::ErrorKind::kUsage);
  const std::string message = error.what();
  CHECK_THAT(message, Catch::Contains("cannot save into directory " + dir.str()));
  CHECK_THAT(message, Catch::Contains(kRefusal));
  CHECK_THAT(message, Catch::Contains("pid " + std::to_string(getpid()) + " on host "));
  CHECK_THAT(message, Catch::Contains("this process: another thread, or an AsyncCheckpointer"));
  CHECK_THAT(message, Catch::Contains(" UTC"));
  CHECK_THAT(message, Catch::Contains(kFix));
  // The refused save wrote nothing.
  CHECK(lock_test_files(dir.path()) == std::set<std::string>{dcpp::detail::kSaveLockFileName});

  // The holder's save ends (here: fails); the directory is free again, and the lock file gone.
  holder.abort_save();
  CHECK(lock_test_files(dir.path()).empty());
  dcpp::save(lock_test_state(2, 0, 1), dir.path());
  CHECK(lock_test_files(dir.path()) ==
        std::set<std::string>{".checksums", ".metadata", "__0_0.distcp"});
  const auto [weight, seed] = lock_test_load(dir.path(), 1);
  CHECK(dcpp::test::bitwise_equal(weight, lock_test_whole(2, 1)));
  CHECK(seed == 2);
}

TEST_CASE("two process groups saving into one directory: the second is refused on every rank") {
  // 4 ranks, groups {0, 1} and {2, 3} (the replicas of a tensor-parallel mesh dimension, saving
  // with mesh.group("tp") as their checkpoint group), both into one directory. Group {0, 1} is
  // set up first and writes only after group {2, 3}'s save has ended: the saves overlap.
  TempDir dir;
  LockTestSignals signals;
  std::vector<LockTestOutcome> outcomes(4);
  on_rank_threads(4, [&](int rank, const c10::intrusive_ptr<c10d::Store>& store) {
    const int group = rank / 2, group_rank = rank % 2;
    auto pg = loopback_group(store, group_rank, 2, "tp" + std::to_string(group));
    dcpp::SaveOptions options;
    options.ranks.process_group = pg;
    try {
      if (group == 0) {
        HoldingWriter writer(dir.path(), signals);
        dcpp::save(lock_test_state(10, group_rank, 2), writer, options);
      } else {
        if (!signals.wait(signals.first_group_holds, 1)) {
          throw dcpp::CheckpointError(dcpp::ErrorKind::kUsage, "the first group never set up");
        }
        dcpp::FileSystemWriter writer(dir.path(), unsynced());
        try {
          dcpp::save(lock_test_state(20, group_rank, 2), writer, options);
        } catch (...) {
          signals.raise(signals.second_group_finished);
          throw;
        }
        signals.raise(signals.second_group_finished);
      }
    } catch (const dcpp::CheckpointError& error) {
      outcomes[rank] = {error.what(), error.kind()};
    }
  });
  for (int rank : {0, 1}) {
    INFO("rank " << rank);
    CHECK(outcomes[rank].error.empty());
  }
  for (int rank : {2, 3}) {
    INFO("rank " << rank << ": " << outcomes[rank].error);
    CHECK(outcomes[rank].kind == dcpp::ErrorKind::kUsage);
    CHECK_THAT(outcomes[rank].error,
               Catch::Contains("checkpoint save failed while planning (rank 0: cannot save into "
                               "directory " +
                               dir.str()));
    CHECK_THAT(outcomes[rank].error, Catch::Contains(kRefusal));
    CHECK_THAT(outcomes[rank].error, Catch::Contains(kFix));
    CHECK(outcomes[rank].error == outcomes[2].error);  // the same error, on both ranks
  }
  // Only the first group's files, and its checkpoint, bit for bit.
  CHECK(lock_test_files(dir.path()) ==
        std::set<std::string>{".checksums", ".metadata", "__0_0.distcp", "__1_0.distcp"});
  const auto [weight, seed] = lock_test_load(dir.path(), 2);
  CHECK(dcpp::test::bitwise_equal(weight, lock_test_whole(10, 2)));
  CHECK(seed == 10);
}

TEST_CASE("two process groups racing into one directory: one commits whole, the other is refused") {
  // The race, unscheduled: each round both groups save at once (replacing what is there).
  // Whichever comes second either finds the first done (and replaces it) or is refused on both of
  // its ranks; what is committed loads bit for bit as one group's save, never a mix.
  TempDir dir;
  for (int round = 0; round < 4; ++round) {
    INFO("round " << round);
    std::vector<LockTestOutcome> outcomes(4);
    on_rank_threads(4, [&](int rank, const c10::intrusive_ptr<c10d::Store>& store) {
      const int group = rank / 2, group_rank = rank % 2;
      dcpp::SaveOptions options;
      options.ranks.process_group =
          loopback_group(store, group_rank, 2, "g" + std::to_string(group));
      options.file_system = unsynced().with_overwrite(true);
      try {
        dcpp::save(lock_test_state(100 * round + group, group_rank, 2), dir.path(), options);
      } catch (const dcpp::CheckpointError& error) {
        outcomes[rank] = {error.what(), error.kind()};
      }
    });
    std::vector<int> committed;
    for (int group : {0, 1}) {
      const LockTestOutcome& a = outcomes[2 * group];
      const LockTestOutcome& b = outcomes[2 * group + 1];
      INFO("group " << group << ": " << a.error << " / " << b.error);
      CHECK(a.error.empty() == b.error.empty());
      if (a.error.empty()) {
        committed.push_back(group);
      } else {
        CHECK(a.error == b.error);
        CHECK(a.kind == dcpp::ErrorKind::kUsage);
        CHECK_THAT(a.error, Catch::Contains(kRefusal));
      }
    }
    REQUIRE_FALSE(committed.empty());
    CHECK_FALSE(fs::exists(dir / dcpp::detail::kSaveLockFileName));
    const auto [weight, seed] = lock_test_load(dir.path(), 2);
    const int group = static_cast<int>(seed % 100);
    CHECK(std::count(committed.begin(), committed.end(), group) == 1);
    CHECK(dcpp::test::bitwise_equal(weight, lock_test_whole(100 * round + group, 2)));
  }
}

TEST_CASE("a killed holder blocks no save, and its leftover lock file trips no reader") {
  TempDir dir;
  dcpp::save(lock_test_state(1, 0, 1), dir.path());  // a checkpoint the killed save replaces
  int ready[2];
  REQUIRE(pipe(ready) == 0);
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    close(ready[0]);
    try {
      dcpp::FileSystemWriter writer(dir.path(), unsynced().with_overwrite(true));
      writer.set_up(0, /*is_coordinator=*/true);
      const char byte = 'x';
      if (write(ready[1], &byte, 1) != 1) _exit(4);
      for (;;) pause();  // holds the lock (the writer lives) until killed
    } catch (...) {
      _exit(3);
    }
  }
  close(ready[1]);
  // The child dies with this test, whatever its outcome (it must not outlive it, holding the
  // test's output open).
  struct Reaper {
    pid_t pid;
    ~Reaper() {
      if (pid > 0) {
        kill(pid, SIGKILL);
        waitpid(pid, nullptr, 0);
      }
    }
  } reaper{child};
  char byte = 0;
  const bool holding = read(ready[0], &byte, 1) == 1;
  close(ready[0]);
  REQUIRE(holding);  // else the child could not take the lock
  const auto replace = dcpp::SaveOptions().with_file_system(unsynced().with_overwrite(true));

  // While the other process holds the directory, a save is refused, naming that process.
  const dcpp::CheckpointError error =
      dcpp::test::error_of([&] { dcpp::save(lock_test_state(2, 0, 1), dir.path(), replace); });
  CHECK(error.kind() == dcpp::ErrorKind::kUsage);
  CHECK_THAT(error.what(), Catch::Contains("pid " + std::to_string(child) + " on host "));
  CHECK_THAT(error.what(), !Catch::Contains("this process"));

  // Killed while holding it: the lock file stays, the lock does not.
  kill(child, SIGKILL);
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  reaper.pid = -1;
  REQUIRE(WIFSIGNALED(status));
  REQUIRE(fs::exists(dir / dcpp::detail::kSaveLockFileName));
  // Readers ignore the leftover: the checkpoint it was left in loads and reads as before.
  CHECK(dcpp::read_metadata(dir.path()).state_dict_metadata.size() == 2);
  auto [before, before_seed] = lock_test_load(dir.path(), 1);
  CHECK(dcpp::test::bitwise_equal(before, lock_test_whole(1, 1)));
  CHECK(before_seed == 1);

  // The next save takes the lock over, commits, and removes the file.
  dcpp::save(lock_test_state(3, 0, 1), dir.path(), replace);
  CHECK_FALSE(fs::exists(dir / dcpp::detail::kSaveLockFileName));
  const auto [weight, seed] = lock_test_load(dir.path(), 1);
  CHECK(dcpp::test::bitwise_equal(weight, lock_test_whole(3, 1)));
  CHECK(seed == 3);
}

TEST_CASE("saves without collectives lock the directory per rank") {
  TempDir dir;
  dcpp::FileSystemWriter holder(dir.path(), unsynced());
  holder.set_up_without_collectives(0);  // rank 0's save in progress
  REQUIRE(fs::exists(dir / dcpp::detail::rank_save_lock_file_name(0)));
  const auto as_rank = [](int rank) {
    dcpp::SaveOptions options;
    options.use_collectives = false;
    options.ranks.rank = rank;
    options.file_system = unsynced();
    return options;
  };
  // Rank 1 saves beside it; a second save of rank 0 is refused.
  dcpp::save(lock_test_state(5, 1, 2), dir.path(), as_rank(1));
  CHECK(fs::exists(dir / "__1.metadata"));
  const dcpp::CheckpointError error =
      dcpp::test::error_of([&] { dcpp::save(lock_test_state(5, 0, 2), dir.path(), as_rank(0)); });
  CHECK(error.kind() == dcpp::ErrorKind::kUsage);
  CHECK_THAT(error.what(),
             Catch::Contains("cannot save into rank 0's part of directory " + dir.str()));
  CHECK_THAT(error.what(), Catch::Contains(kRefusal));
  CHECK_FALSE(fs::exists(dir / "__0_0.distcp"));

  holder.abort_save();
  dcpp::save(lock_test_state(5, 0, 2), dir.path(), as_rank(0));
  CHECK_FALSE(fs::exists(dir / dcpp::detail::rank_save_lock_file_name(0)));
  CHECK_FALSE(fs::exists(dir / dcpp::detail::rank_save_lock_file_name(1)));
  const auto [weight, seed] = lock_test_load(dir.path(), 2);
  CHECK(dcpp::test::bitwise_equal(weight, lock_test_whole(5, 2)));
}

TEST_CASE("a lock held by one thread refuses another thread's lock of the same file") {
  // Open-file-description locks conflict within one process (POSIX record locks would not).
  TempDir dir;
  dcpp::detail::SaveLock held = dcpp::detail::SaveLock::acquire(dir.path(), "x.lock", "d");
  REQUIRE(held.held());
  std::string refused;
  std::thread other([&] {
    try {
      dcpp::detail::SaveLock::acquire(dir.path(), "x.lock", "d");
    } catch (const dcpp::CheckpointError& error) {
      refused = error.what();
    }
  });
  other.join();
  CHECK_THAT(refused, Catch::Contains(kRefusal));
  held.release();
  CHECK_FALSE(fs::exists(dir / "x.lock"));
  dcpp::detail::SaveLock again = dcpp::detail::SaveLock::acquire(dir.path(), "x.lock", "d");
  CHECK(again.held());
}
