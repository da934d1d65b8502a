// The memory tier's replicas (MemoryTierOptions::replicas): four ranks on two "hosts" of two
// (ranks_per_host), as threads of this process, each memory step sent to the rank of the other
// host with the same place (cliques {0, 2} and {1, 3}). The second host's regions are then wiped:
// the job resumes on four ranks from the first host's replicas (sent over the group), and on two
// ranks resharded; a save that fails on one rank keeps the cliques' rounds paired.

#include "dcpp_test.h"
#include "manager_test_support.h"
#include "rank_threads.h"

#include <dcpp/core/checkpoint_error.h>
#include <dcpp/plugin/checkpoint_manager.h>
#include <dcpp/state_dict/sharded_tensor.h>
#include <dcpp/state_dict/stateful.h>
#include <dcpp/storage/memory_slots.h>

#include <fcntl.h>
#include <unistd.h>

#include <limits>

namespace fs = std::filesystem;
using dcpp::StateDict;
using dcpp::test::request;
using dcpp::test::TempDir;

namespace {

constexpr int64_t kRows = 16;

// The whole of step `step`'s sharded tensor.
at::Tensor global_w(int64_t step) {
  return at::arange(kRows * 5, at::kDouble).reshape({kRows, 5}).mul(0.1).add(step).sin();
}

// Rank `rank` of `world`'s state at step `step` (`target`: zeros to load into): its rows of w,
// and the step as a value.
StateDict rank_state(int64_t step, int rank, int world, bool target = false) {
  const int64_t rows = kRows / world, begin = rank * rows;
  const at::Tensor w = target ? at::zeros({kRows, 5}, at::kDouble) : global_w(step);
  StateDict state;
  state.insert("w", dcpp::ShardedTensor(
                        {kRows, 5}, {{w.narrow(0, begin, rows).clone(), {begin, 0}}}, at::kDouble));
  state.insert("step", target ? int64_t{-1} : step);
  return state;
}

bool holds_step(const StateDict& state, int64_t step, int rank, int world) {
  const int64_t rows = kRows / world;
  const auto& shard = state.at("w").sharded_tensor().local_shards().at(0).tensor;
  return dcpp::test::bitwise_equal(shard, global_w(step).narrow(0, rank * rows, rows)) &&
         state.at("step").value().toInt() == step;
}

// A Stateful whose state cannot be taken (a data loader in a bad state, say).
class ThrowingStateful final : public dcpp::Stateful {
 public:
  StateDict state_dict() override { throw std::runtime_error("the loader's state is gone"); }
  void load_state_dict(const StateDict&) override {}
};

// A job's regions, own and replicas, removed when the test ends.
struct ReplicatedJob {
  explicit ReplicatedJob(const std::string& what)
      : name("memrepl-" + what + "-" + std::to_string(::getpid())) {
    release_all();
  }
  ~ReplicatedJob() { release_all(); }
  void release_host(int first_rank, int ranks) const {
    for (int r = first_rank; r < first_rank + ranks; ++r) {
      dcpp::MemorySlots(name, r, 1).release();
      for (int owner = 0; owner < 4; ++owner) {
        if (owner != r) dcpp::MemorySlots(name, owner, 1, 1, r).release();
      }
    }
  }
  void release_all() const { release_host(0, 4); }
  std::optional<int64_t> replica_step(int owner, int holder) const {
    const auto newest = dcpp::MemorySlots(name, owner, 1, 1, holder).newest();
    return newest ? std::optional<int64_t>(newest->step) : std::nullopt;
  }
  // A manager of `world` ranks on hosts of `per_host`, keeping one replica of each step.
  dcpp::CheckpointManagerOptions options(const fs::path& root, int rank, int world, int per_host,
                                         const c10::intrusive_ptr<c10d::Store>& store) const {
    return dcpp::CheckpointManagerOptions()
        .with_root(root)
        .with_async(false)
        .with_process_group(dcpp::test::loopback_group(store, rank, world, "train"))
        .with_memory(dcpp::MemoryTierOptions()
                         .with_every_steps(1)
                         .with_job(name)
                         .with_ranks_per_host(per_host)
                         .with_replicas(
                             1, dcpp::test::loopback_group(store, rank, world, "memory-replicas")));
  }
  // Steps 1 to 3 saved to memory on 4 ranks on 2 hosts; the managers' ends wait for the last
  // rounds. Returns whether every save succeeded.
  bool save_three_steps(const fs::path& root) const {
    bool saved[4] = {};
    dcpp::test::on_rank_threads(4, [&](int r, const c10::intrusive_ptr<c10d::Store>& store) {
      dcpp::CheckpointManager manager(options(root, r, 4, 2, store));
      saved[r] = true;
      for (int64_t step = 1; step <= 3; ++step) {
        saved[r] = manager.save_to_memory(rank_state(step, r, 4), request(step)) && saved[r];
      }
    });
    return saved[0] && saved[1] && saved[2] && saved[3];
  }
  // What `world` ranks on hosts of `per_host` restore: each rank's state and manifest.
  struct Restored {
    std::vector<StateDict> states;
    std::vector<std::optional<dcpp::CheckpointInfo>> infos;
  };
  Restored restore(const fs::path& root, int world, int per_host) const {
    Restored restored{std::vector<StateDict>(world),
                      std::vector<std::optional<dcpp::CheckpointInfo>>(world)};
    dcpp::test::on_rank_threads(world, [&](int r, const c10::intrusive_ptr<c10d::Store>& store) {
      dcpp::CheckpointManager manager(options(root, r, world, per_host, store));
      restored.states[r] = rank_state(0, r, world, /*target=*/true);
      restored.infos[r] = manager.restore(restored.states[r]);
    });
    return restored;
  }
  std::string name;
};

}  // namespace

TEST_CASE("a job that lost a host resumes from its peers' replicas, on 4 ranks and on 2") {
  TempDir dir;
  ReplicatedJob job("lost-host");
  const fs::path root = dir / "ckpt";
  REQUIRE(job.save_three_steps(root));
  // Each rank's newest step is kept by its peer on the other host.
  for (const auto& [owner, holder] : {std::pair{0, 2}, {2, 0}, {1, 3}, {3, 1}}) {
    INFO("rank " << owner << "'s replica on rank " << holder);
    CHECK(job.replica_step(owner, holder) == 3);
  }
  CHECK_FALSE(job.replica_step(0, 1));  // not in a clique

  job.release_host(2, 2);  // the second host is gone, and its memory with it
  const auto restored = job.restore(root, 4, 2);
  for (int r = 0; r < 4; ++r) {
    INFO("rank " << r);
    REQUIRE(restored.infos[r]);
    CHECK(restored.infos[r]->step == 3);
    CHECK(holds_step(restored.states[r], 3, r, 4));
  }
  // Ranks 2 and 3 read the replicas that ranks 0 and 1 keep (in place: these "hosts" share
  // /dev/shm; multi_rank_test's two hosts have their own, and send them).
  CHECK(restored.infos[2]->path.filename().string().rfind("dcpp." + job.name + ".2.at0.", 0) == 0);
  CHECK(restored.infos[3]->path.filename().string().rfind("dcpp." + job.name + ".3.at1.", 0) == 0);

  // Two ranks: each reads the rows it now holds from the four ranks' steps.
  const auto resharded = job.restore(root, 2, 1);
  for (int r = 0; r < 2; ++r) {
    INFO("rank " << r << " of 2");
    REQUIRE(resharded.infos[r]);
    CHECK(resharded.infos[r]->step == 3);
    CHECK(resharded.infos[r]->world_size == 4);
    CHECK(holds_step(resharded.states[r], 3, r, 2));
  }
}

TEST_CASE(
    "a corrupted replica is passed over by its CRC: every rank resumes from the step before") {
  TempDir dir;
  ReplicatedJob job("corrupt-replica");
  const fs::path root = dir / "ckpt";
  REQUIRE(job.save_three_steps(root));
  job.release_host(2, 2);
  // A flipped byte in the step-3 replica rank 0 keeps of rank 2.
  bool flipped = false;
  for (const dcpp::MemoryStep& held :
       dcpp::MemorySlots(job.name, 2, 1, 1, /*holder=*/0).complete_steps()) {
    if (held.step != 3) continue;
    const int fd = ::open(("/dev/shm" + held.region).c_str(), O_RDWR);
    char byte = 0;
    const off_t at = 4096 + static_cast<off_t>(held.bytes.size()) - 9;
    flipped = fd >= 0 && ::pread(fd, &byte, 1, at) == 1;
    byte ^= 0x04;
    flipped = flipped && ::pwrite(fd, &byte, 1, at) == 1;
    if (fd >= 0) ::close(fd);
  }
  REQUIRE(flipped);
  const auto restored = job.restore(root, 4, 2);
  for (int r = 0; r < 4; ++r) {
    INFO("rank " << r);
    REQUIRE(restored.infos[r]);
    CHECK(restored.infos[r]->step == 2);
    CHECK(holds_step(restored.states[r], 2, r, 4));
  }
}

TEST_CASE("a memory save that fails on one rank keeps its clique's rounds paired") {
  // Copied on the calling thread, or on the memory tier's background thread (whose failed copies
  // are recorded when they end).
  const bool copy_while_training = GENERATE(false, true);
  INFO("copy_while_training " << copy_while_training);
  TempDir dir;
  ReplicatedJob job(copy_while_training ? "failed-save-overlap" : "failed-save");
  const fs::path root = dir / "ckpt";
  bool saved[4][3] = {};
  bool returned[4][3] = {};
  dcpp::test::on_rank_threads(4, [&](int r, const c10::intrusive_ptr<c10d::Store>& store) {
    dcpp::CheckpointManagerOptions options = job.options(root, r, 4, 2, store);
    options.memory.max_bytes_per_rank = 64 << 10;
    options.memory.copy_while_training = copy_while_training;
    dcpp::CheckpointManager manager(options);
    for (int64_t step = 1; step <= 3; ++step) {
      StateDict state = rank_state(step, r, 4);
      // Rank 3's step 2 does not fit: it is refused, recorded, and sent to nobody. Rank 1's
      // fails before its copy: a Stateful that throws.
      if (r == 3 && step == 2) state.insert("big", at::zeros({1 << 15}, at::kDouble));
      if (r == 1 && step == 2) state.insert("loader", std::make_shared<ThrowingStateful>());
      returned[r][step - 1] = manager.save_to_memory(state, request(step));
    }
    manager.wait_for_memory_copy();
    for (const dcpp::SaveRecord& record : manager.history()) saved[r][record.step - 1] = record.ok;
  });
  // Queued copies return true; a Stateful that throws fails before anything is queued.
  for (int r = 0; r < 4; ++r) {
    for (int64_t step = 1; step <= 3; ++step) {
      INFO("rank " << r << ", step " << step);
      CHECK(returned[r][step - 1] ==
            (copy_while_training ? !(r == 1 && step == 2) : saved[r][step - 1]));
    }
  }
  for (int r = 0; r < 4; ++r) {
    for (int64_t step = 1; step <= 3; ++step) {
      INFO("rank " << r << ", step " << step);
      CHECK(saved[r][step - 1] == !((r == 3 || r == 1) && step == 2));
    }
  }
  CHECK(job.replica_step(3, 1) == 3);
  CHECK(job.replica_step(1, 3) == 3);
  CHECK(job.replica_step(0, 2) == 3);
}

TEST_CASE("replicas on the same host, or without a group, are refused when the manager is made") {
  TempDir dir;
  ReplicatedJob job("refused");
  std::string errors[2];
  dcpp::test::on_rank_threads(2, [&](int r, const c10::intrusive_ptr<c10d::Store>& store) {
    dcpp::CheckpointManagerOptions options = job.options(dir / "ckpt", r, 2, 1, store);
    options.memory.replication_group.reset();
    try {
      dcpp::CheckpointManager manager(options);
    } catch (const dcpp::CheckpointError& e) {
      errors[r] = e.what();
    }
  });
  for (const std::string& error : errors) {
    CHECK_THAT(error, Catch::Contains("replicas need a replication_group"));
  }

  // The launcher says both ranks run on node 0, where ranks_per_host (1) puts them on two hosts.
  ::setenv("GROUP_RANK", "0", 1);
  dcpp::test::on_rank_threads(2, [&](int r, const c10::intrusive_ptr<c10d::Store>& store) {
    errors[r].clear();
    try {
      dcpp::CheckpointManager manager(job.options(dir / "ckpt", r, 2, 1, store));
    } catch (const dcpp::CheckpointError& e) {
      errors[r] = e.what();
    }
  });
  ::unsetenv("GROUP_RANK");
  for (const std::string& error : errors) {
    CHECK_THAT(error, Catch::Contains("ranks 0 and 1 (node 0) would keep each other's steps on "
                                      "the same host"));
  }
}
