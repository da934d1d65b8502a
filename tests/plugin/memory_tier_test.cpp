// The CheckpointManager's memory tier (<dcpp/plugin/memory_tier.h>): steps copied into shared
// memory that outlives the manager, restore() preferring the newest step every rank holds there,
// a corrupted slot detected by its CRC and the next slot or tier used, a /dev/shm too small
// refused when the manager is made, and ranks that disagree on their newest step agreeing on the
// newest they all hold.

#include "dcpp_test.h"
#include "manager_test_support.h"

#include <dcpp/checkpoint/checkpointer.h>
#include <dcpp/core/checkpoint_error.h>
#include <dcpp/plugin/checkpoint_manager.h>
#include <dcpp/plugin/memory_flush.h>
#include <dcpp/storage/memory_slots.h>
#include <dcpp/storage/memory_step.h>

#include <torch/csrc/distributed/c10d/HashStore.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <thread>

namespace fs = std::filesystem;
using dcpp::test::request;
using dcpp::test::TempDir;

namespace {

dcpp::StateDict memory_state_of_step(int64_t step) {
  dcpp::StateDict state;
  state.insert("model.weight", at::randn({32, 48}).add(static_cast<double>(step)));
  state.insert("model.ids", at::arange(step, step + 100, at::kLong));
  state.insert("step", step);
  return state;
}

dcpp::StateDict target_like(const dcpp::StateDict& state) {
  dcpp::StateDict zeros;
  zeros.insert("model.weight", at::zeros_like(state.at("model.weight").tensor()));
  zeros.insert("model.ids", at::zeros_like(state.at("model.ids").tensor()));
  zeros.insert("step", int64_t{-1});
  return zeros;
}

bool same_state(const dcpp::StateDict& a, const dcpp::StateDict& b) {
  return dcpp::test::bitwise_equal(a.at("model.weight").tensor(), b.at("model.weight").tensor()) &&
         dcpp::test::bitwise_equal(a.at("model.ids").tensor(), b.at("model.ids").tensor()) &&
         a.at("step").value().toInt() == b.at("step").value().toInt();
}

// A memory tier of this test's own job name, its regions removed when the test ends.
struct Job {
  explicit Job(const std::string& what, int ranks = 1)
      : name("memtier-" + what + "-" + std::to_string(::getpid())), ranks(ranks) {
    release();
  }
  ~Job() { release(); }
  void release() {
    for (int r = 0; r < ranks; ++r) dcpp::MemorySlots(name, r, 1).release();
  }
  dcpp::CheckpointManagerOptions options(const fs::path& root, int64_t every = 1) const {
    return dcpp::CheckpointManagerOptions().with_root(root).with_async(false).with_memory(
        dcpp::MemoryTierOptions().with_every_steps(every).with_job(name));
  }
  // Flips a byte of the data of rank `rank`'s memory step `step`.
  void corrupt(int64_t step, int rank = 0) const {
    for (const dcpp::MemoryStep& held : dcpp::MemorySlots(name, rank, 1).complete_steps()) {
      if (held.step != step) continue;
      const int fd = ::open(("/dev/shm" + held.region).c_str(), O_RDWR);
      REQUIRE(fd >= 0);
      char byte = 0;
      const off_t at = 4096 + static_cast<off_t>(held.bytes.size()) - 7;
      REQUIRE(::pread(fd, &byte, 1, at) == 1);
      byte ^= 0x20;
      REQUIRE(::pwrite(fd, &byte, 1, at) == 1);
      ::close(fd);
      return;
    }
    FAIL("rank " << rank << " holds no memory step " << step);
  }
  std::string name;
  int ranks;
};

}  // namespace

TEST_CASE("restore takes the newest step from the memory tier, bit for bit") {
  TempDir dir;
  Job job("newest");
  std::map<int64_t, dcpp::StateDict> saved;
  {
    dcpp::CheckpointManager manager(job.options(dir / "ckpt"));
    for (int64_t step = 1; step <= 4; ++step) {
      saved[step] = memory_state_of_step(step);
      CHECK(manager.is_memory_save_due(step));
      if (step == 2) {
        manager.save(saved[step], request(step));  // to disk, and to memory first
      } else {
        REQUIRE(manager.save_to_memory(saved[step], request(step)));
      }
    }
    const auto history = manager.history();
    REQUIRE(history.size() == 5);  // 4 memory copies, 1 disk save
    CHECK(history[1].in_memory);
    CHECK(history[1].step == 2);
    CHECK_FALSE(history[2].in_memory);
  }
  // A manager made again, as by a restarted process: step 4 from memory, step 3 when asked.
  dcpp::CheckpointManager manager(job.options(dir / "ckpt"));
  dcpp::StateDict restored = target_like(saved[4]);
  const auto info = manager.restore(restored);
  REQUIRE(info);
  CHECK(info->step == 4);
  CHECK(info->path.string().rfind("/dev/shm/dcpp." + job.name + ".0.", 0) == 0);
  CHECK(same_state(restored, saved[4]));
  dcpp::StateDict asked = target_like(saved[3]);
  REQUIRE(manager.restore(asked, dcpp::RestoreRequest().with_step(3))->step == 3);
  CHECK(same_state(asked, saved[3]));
  // Step 2 is on disk alone now (the slots hold 3 and 4).
  dcpp::StateDict from_disk = target_like(saved[2]);
  const auto disk = manager.restore(from_disk, dcpp::RestoreRequest().with_step(2));
  CHECK(disk->path == dir / "ckpt" / "step-00000002");
  CHECK(same_state(from_disk, saved[2]));
}

TEST_CASE("a corrupted memory step is detected by its CRC; the other slot, then the disk, serve") {
  TempDir dir;
  Job job("corrupt");
  std::map<int64_t, dcpp::StateDict> saved;
  {
    dcpp::CheckpointManager manager(job.options(dir / "ckpt"));
    saved[2] = memory_state_of_step(2);
    manager.save(saved[2], request(2));
    for (int64_t step : {3, 4}) {
      saved[step] = memory_state_of_step(step);
      REQUIRE(manager.save_to_memory(saved[step], request(step)));
    }
  }
  job.corrupt(4);
  dcpp::CheckpointManager manager(job.options(dir / "ckpt"));
  dcpp::StateDict restored = target_like(saved[3]);
  REQUIRE(manager.restore(restored)->step == 3);
  CHECK(same_state(restored, saved[3]));
  job.corrupt(3);
  restored = target_like(saved[2]);
  const auto info = manager.restore(restored);
  REQUIRE(info->step == 2);
  CHECK(info->path == dir / "ckpt" / "step-00000002");
  CHECK(same_state(restored, saved[2]));
}

TEST_CASE("a disk step newer than the memory tier's wins") {
  TempDir dir;
  Job job("older");
  dcpp::CheckpointManager manager(job.options(dir / "ckpt", 10));
  CHECK_FALSE(manager.is_memory_save_due(5));
  REQUIRE(manager.save_to_memory(memory_state_of_step(10), request(10)));
  const dcpp::StateDict twelve = memory_state_of_step(12);
  manager.save(twelve, request(12));  // not a memory step: disk only
  dcpp::StateDict restored = target_like(twelve);
  REQUIRE(manager.restore(restored)->step == 12);
  CHECK(same_state(restored, twelve));
}

TEST_CASE("a /dev/shm too small for the memory tier is refused when the manager is made") {
  TempDir dir;
  Job job("room");
  const fs::path root = dir / "ckpt";
  {
    dcpp::CheckpointManager manager(job.options(root));
    manager.save(memory_state_of_step(1), request(1));
  }
  dcpp::CheckpointManagerOptions options = job.options(root);
  options.memory.max_bytes_per_rank = int64_t{1} << 50;  // 1 PiB
  const dcpp::CheckpointError error =
      dcpp::test::error_of([&] { dcpp::CheckpointManager manager(options); });
  CHECK(error.kind() == dcpp::ErrorKind::kIo);
  CHECK_THAT(error.what(), Catch::Contains("/dev/shm has"));
  CHECK_THAT(error.what(), Catch::Contains("max_bytes_per_rank"));
  CHECK(dcpp::list_checkpoints(root).size() == 1);  // the disk tier untouched
  // A step larger than the cap is refused: recorded, not thrown.
  options.memory.max_bytes_per_rank = 1024;
  dcpp::CheckpointManager manager(options);
  CHECK_FALSE(manager.save_to_memory(memory_state_of_step(2), request(2)));
  CHECK_THAT(manager.history().back().error, Catch::Contains("1024"));
}

TEST_CASE("ranks that hold different newest steps resume from the newest they all hold") {
  TempDir dir;
  Job job("agree", 2);
  const fs::path root = dir / "ckpt";
  std::map<int64_t, dcpp::StateDict> saved[2];
  for (int r = 0; r < 2; ++r) {
    for (int64_t step = 5; step <= 6; ++step) saved[r][step] = memory_state_of_step(step * 10 + r);
  }
  dcpp::StateDict restored[2] = {target_like(saved[0][5]), target_like(saved[1][5])};
  std::optional<dcpp::CheckpointInfo> infos[2];
  std::string errors[2];
  const auto on_two_ranks = [&](const std::function<void(dcpp::CheckpointManager&, int)>& body) {
    auto store = c10::make_intrusive<c10d::HashStore>();
    std::vector<std::thread> threads;
    for (int r = 0; r < 2; ++r) {
      threads.emplace_back([&, r] {
        try {
          dcpp::CheckpointManager manager(job.options(root).with_store(store, r, 2));
          body(manager, r);
        } catch (const std::exception& e) {
          errors[r] = e.what();
        }
      });
    }
    for (auto& thread : threads) thread.join();
  };
  // Rank 1 dies before its copy of step 6: step 6 is in memory on rank 0 only.
  on_two_ranks([&](dcpp::CheckpointManager& manager, int r) {
    manager.save_to_memory(saved[r][5], request(5));
    if (r == 0) manager.save_to_memory(saved[r][6], request(6));
  });
  on_two_ranks(
      [&](dcpp::CheckpointManager& manager, int r) { infos[r] = manager.restore(restored[r]); });
  for (int r = 0; r < 2; ++r) {
    INFO("rank " << r << ": " << errors[r]);
    REQUIRE(errors[r].empty());
    REQUIRE(infos[r]);
    CHECK(infos[r]->step == 5);
    CHECK(same_state(restored[r], saved[r][5]));
  }
}

TEST_CASE("flush_memory_tier commits the newest memory step under the root, then removes it") {
  TempDir dir;
  Job job("flush");
  const fs::path root = dir / "ckpt";
  std::map<int64_t, dcpp::StateDict> saved;
  {
    dcpp::CheckpointManager manager(job.options(root));
    saved[2] = memory_state_of_step(2);
    manager.save(saved[2], request(2));
    for (int64_t step : {3, 4}) {
      saved[step] = memory_state_of_step(step);
      REQUIRE(manager.save_to_memory(saved[step], request(step, 0.5)));
    }
  }  // the job is gone; its regions stay
  // Ranks that hold no common step: nothing written, nothing removed.
  const dcpp::MemoryFlushResult none = dcpp::flush_memory_tier(
      dcpp::MemoryFlushOptions().with_root(root).with_job(job.name).with_ranks(2));
  CHECK_FALSE(none.written);
  CHECK_THAT(none.message, Catch::Contains("no step of which this host holds all 2 ranks' copies"));
  REQUIRE(dcpp::MemorySlots(job.name, 0, 1).complete_steps().size() == 2);

  const dcpp::MemoryFlushResult flushed = dcpp::flush_memory_tier(
      dcpp::MemoryFlushOptions().with_root(root).with_job(job.name).with_sync_files(false));
  INFO(flushed.message);
  REQUIRE(flushed.written);
  CHECK(flushed.written->step == 4);
  CHECK(flushed.written->path == root / "step-00000004");
  CHECK(flushed.written->metrics.at("loss") == 0.5);
  CHECK(dcpp::latest_checkpoint(root)->step == 4);
  CHECK(dcpp::MemorySlots(job.name, 0, 1).complete_steps().empty());  // removed
  // A job started again resumes from it, from disk.
  dcpp::CheckpointManager manager(job.options(root));
  dcpp::StateDict restored = target_like(saved[4]);
  const auto info = manager.restore(restored);
  REQUIRE(info);
  CHECK(info->path == root / "step-00000004");
  CHECK(same_state(restored, saved[4]));
  // Nothing newer in memory than on disk: nothing written, the regions removed all the same.
  REQUIRE(manager.save_to_memory(saved[3], request(3)));
  const dcpp::MemoryFlushResult again = dcpp::flush_memory_tier(
      dcpp::MemoryFlushOptions().with_root(root).with_job(job.name).with_sync_files(false));
  CHECK_FALSE(again.written);
  CHECK_THAT(again.message, Catch::Contains("no newer than step 4"));
  CHECK(dcpp::MemorySlots(job.name, 0, 1).complete_steps().empty());
}

TEST_CASE("flush_memory_tier refuses the steps of a job of another world size, naming it") {
  TempDir dir;
  Job job("flush-world");
  dcpp::MemorySlots slots(job.name, 0, 1 << 20);
  dcpp::MemoryStepWriter writer(slots, 9, "save-9", /*world_size=*/2, "{}");
  dcpp::save(memory_state_of_step(9), writer,
             dcpp::SaveOptions().with_use_collectives(false).with_rank(0));
  const dcpp::CheckpointError error = dcpp::test::error_of([&] {
    dcpp::flush_memory_tier(dcpp::MemoryFlushOptions().with_root(dir / "ckpt").with_job(job.name));
  });
  CHECK(error.kind() == dcpp::ErrorKind::kUsage);
  CHECK_THAT(error.what(), Catch::Contains("saved by a job of 2 ranks, and 1 were named"));
  CHECK(dcpp::list_checkpoints(dir / "ckpt").empty());
  CHECK(slots.complete_steps().size() == 1);  // kept
}
