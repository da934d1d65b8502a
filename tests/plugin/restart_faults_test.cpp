// Restarts against a store that fails (docs/reliability.md, "Restarts under store faults"): a
// step the store will not give is never taken for a missing one, and a resume that could not see
// the store forks, so that its run is never mixed with steps the store holds unseen. Against the
// real S3 server behind the fault proxy (storage/s3_test_server.h).

#include "dcpp_test.h"
#include "manager_test_support.h"
#include "storage/s3_test_server.h"

#include <dcpp/core/checkpoint_error.h>
#include <dcpp/plugin/checkpoint_manager.h>
#include <dcpp/storage/s3_prefix.h>

#include <chrono>
#include <thread>

namespace fs = std::filesystem;
using dcpp::test::request;
using dcpp::test::S3Fault;
using dcpp::test::S3TestServer;
using dcpp::test::steps_of;
using dcpp::test::TempDir;

namespace {

// Values no other (run, step) has.
dcpp::StateDict run_state(int run, int64_t step) {
  dcpp::StateDict state;
  state.insert("w", at::arange(4096, at::kDouble) + static_cast<double>(1000000 * run + step));
  state.insert("step", step);
  state.insert("run", static_cast<int64_t>(run));
  return state;
}

// What `manager` resumes from now, after checking its values bit for bit: (run, step), or
// (0, -1) for nothing.
std::pair<int, int64_t> resumed_run(dcpp::CheckpointManager& manager) {
  dcpp::StateDict state = run_state(0, -1);
  const std::optional<dcpp::CheckpointInfo> info = manager.restore(state);
  if (!info) return {0, -1};
  const int run = static_cast<int>(state.at("run").value().toInt());
  const int64_t step = state.at("step").value().toInt();
  CHECK(step == info->step);
  CHECK(at::equal(state.at("w").tensor(), run_state(run, step).at("w").tensor()));
  return {run, step};
}

struct FaultyStore {
  S3TestServer& server = S3TestServer::get();
  TempDir dir;
  std::string url = "s3://" + server.create_bucket("restart-faults") + "/run";

  FaultyStore() {
    server.clear_faults();
    server.reset_traffic();
  }
  ~FaultyStore() { server.clear_faults(); }

  dcpp::CheckpointManagerOptions options(const fs::path& root) const {
    return dcpp::CheckpointManagerOptions().with_root(root).with_async(false).with_remote(
        dcpp::RemoteTierOptions().with_url(url).with_s3(server.options()));
  }
  // A job of identity `job` whose drain lease lasts `lease` without renewal.
  dcpp::CheckpointManagerOptions job(const fs::path& root, const std::string& job,
                                     std::chrono::seconds lease = std::chrono::seconds(600)) const {
    dcpp::CheckpointManagerOptions o = options(root);
    o.remote.with_job_id(job).with_drain_lease(lease);
    return o;
  }
  // The drain of `manager` fails: another job holds the prefix.
  static void require_refused(dcpp::CheckpointManager& manager) {
    try {
      manager.wait_for_remote();
      FAIL("a second job drained a prefix another job holds");
    } catch (const dcpp::CheckpointError& error) {
      CHECK(error.kind() == dcpp::ErrorKind::kUsage);
      CHECK_THAT(std::string(error.what()), Catch::Contains("drained by another job"));
    }
  }
  // Every GET whose path holds `path_contains` answered 500, for the rest of the test.
  void fail_reads_of(const std::string& path_contains) const {
    S3Fault fault;
    fault.method = "GET";
    fault.path_contains = path_contains;
    fault.status = 500;
    fault.times = 1000000;
    server.inject(fault);
  }
  // Run 1 saves steps 1 to `last` into `root` and drains them.
  void save_run(const fs::path& root, int64_t last) const {
    dcpp::CheckpointManager manager(options(root));
    for (int64_t step = 1; step <= last; ++step) manager.save(run_state(1, step), request(step));
    manager.wait_for_remote();
  }
};

}  // namespace

TEST_CASE("a step the store will not give fails the restore naming it, and nothing is written") {
  FaultyStore store;
  store.save_run(store.dir / "first", 5);
  const char* object = GENERATE("step-00000005/dcpp_checkpoint.json", "step-00000005/.metadata");
  INFO("the store answers 500 to every read of " << object);
  store.fail_reads_of(object);
  const fs::path root = store.dir / "empty";  // a new machine: nothing local
  {
    dcpp::CheckpointManager manager(store.options(root));  // a warning, no throw
    dcpp::StateDict state = run_state(0, -1);
    try {
      manager.restore(state);
      FAIL("the restore went on without step 5");
    } catch (const dcpp::CheckpointError& error) {
      CHECK(error.kind() == dcpp::ErrorKind::kIo);
      CHECK_THAT(std::string(error.what()), Catch::Contains("remote step 5"));
      CHECK_THAT(std::string(error.what()), Catch::Contains("cannot be read"));
    }
  }
  store.server.clear_faults();
  dcpp::CheckpointManager manager(store.options(root));
  CHECK(steps_of(manager.list_remote()) == std::vector<int64_t>{1, 2, 3, 4, 5});
  CHECK(resumed_run(manager) == std::make_pair(1, int64_t{5}));
}

TEST_CASE("a resume from the local root while the store cannot be read never mixes two runs") {
  FaultyStore store;
  const fs::path root = store.dir / "checkpoints";
  store.save_run(root, 5);
  // This host's root lags the store: it holds steps 1 and 2 only.
  for (int64_t step = 3; step <= 5; ++step) fs::remove_all(root / dcpp::step_directory_name(step));
  store.fail_reads_of("");
  {
    dcpp::CheckpointManager manager(store.options(root));
    CHECK(resumed_run(manager) == std::make_pair(1, int64_t{2}));
    manager.save(run_state(2, 3), request(3));  // run 2 goes on from step 2
  }
  store.server.clear_faults();
  {
    dcpp::CheckpointManager manager(store.options(root));
    manager.wait_for_remote();
    // Run 1's steps 4 and 5 were left behind by run 2: a resume never takes them.
    CHECK(resumed_run(manager) == std::make_pair(2, int64_t{3}));
  }
  dcpp::CheckpointManager elsewhere(store.options(store.dir / "elsewhere"));
  CHECK(resumed_run(elsewhere) == std::make_pair(2, int64_t{3}));
}

TEST_CASE("the drain lease lives as long as its job, drain passes or not") {
  FaultyStore store;
  dcpp::CheckpointManager first(store.job(store.dir / "first", "job-1", std::chrono::seconds(2)));
  first.save(run_state(1, 1), request(1));
  first.wait_for_remote();  // takes the lease
  // No drain pass for more than twice the lease: the heartbeat keeps it.
  std::this_thread::sleep_for(std::chrono::seconds(5));
  dcpp::CheckpointManager second(store.job(store.dir / "second", "job-2"));
  second.save(run_state(2, 101), request(101));
  FaultyStore::require_refused(second);
  CHECK(steps_of(first.list_remote()) == std::vector<int64_t>{1});
  first.save(run_state(1, 2), request(2));
  first.wait_for_remote();
  CHECK(steps_of(first.list_remote()) == std::vector<int64_t>{1, 2});
}

TEST_CASE("a restarted job takes over its dead predecessor's lease at once, another job cannot") {
  FaultyStore store;
  // What a job killed while holding the lease leaves: a lease good for ten more minutes.
  const double in_ten_minutes =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count() +
      600;
  dcpp::S3Prefix(store.url, store.server.options())
      .write(".dcpp-drain-lease",
             R"({"owner": "killed", "job": "job-7", "host": "gone", "pid": 1, )"
             R"("expires_at": )" +
                 std::to_string(in_ten_minutes) + "}");
  {
    dcpp::CheckpointManager other(store.job(store.dir / "other", "job-8"));
    other.save(run_state(8, 1), request(1));
    FaultyStore::require_refused(other);
  }
  dcpp::CheckpointManager restarted(store.job(store.dir / "restarted", "job-7"));
  restarted.save(run_state(7, 1), request(1));
  restarted.wait_for_remote();
  CHECK(steps_of(restarted.list_remote()) == std::vector<int64_t>{1});
  {
    // A second restart of job 7 takes it over in turn; the first, still alive, never takes it
    // back (two live processes of one job would take it from each other at every pass).
    dcpp::CheckpointManager again(store.job(store.dir / "again", "job-7"));
    again.wait_for_remote();
    restarted.save(run_state(7, 2), request(2));
    FaultyStore::require_refused(restarted);
  }  // the second ends: its lease is released, and the first drains again
  restarted.wait_for_remote();
  CHECK(steps_of(restarted.list_remote()) == std::vector<int64_t>{1, 2});
  dcpp::CheckpointManager elsewhere(store.options(store.dir / "elsewhere"));
  CHECK(resumed_run(elsewhere) == std::make_pair(7, int64_t{2}));
}

TEST_CASE("wait_for_remote reports what its own retry did, not an earlier pass's failure") {
  FaultyStore store;
  S3Fault fault;  // the first pass's commit of step 1 fails, every try of it
  fault.method = "PUT";
  fault.path_contains = "step-00000001/.metadata";
  fault.status = 500;
  fault.times = store.server.options().max_attempts;
  store.server.inject(fault);
  dcpp::CheckpointManager manager(store.options(store.dir / "checkpoints"));
  manager.save(run_state(1, 1), request(1));
  manager.wait_for_remote();  // the retry copies the step: no error
  CHECK(steps_of(manager.list_remote()) == std::vector<int64_t>{1});
  CHECK(store.server.traffic().faults == fault.times);
}

TEST_CASE("a manager's start and end spend a bounded time on a store that hangs, losing nothing") {
  FaultyStore store;
  const fs::path root = store.dir / "checkpoints";
  store.save_run(root, 1);
  S3Fault hang;
  hang.stall = true;
  hang.times = 1000000;
  store.server.inject(hang);
  dcpp::CheckpointManagerOptions options = store.options(root);
  options.remote.with_restart_timeout(std::chrono::seconds(2));
  const auto start = std::chrono::steady_clock::now();
  {
    dcpp::CheckpointManager manager(options);   // its listing, then its first drain pass's lease
    manager.save(run_state(1, 2), request(2));  // committed locally; its drain pass is queued
  }  // the end waits for the passes: their reads of the store end within the timeout
  const auto took = std::chrono::steady_clock::now() - start;
  store.server.clear_faults();
  // A deadline, not a speed: each bounded read gives up after 2 s, where one unbounded read takes
  // max_attempts x stall_timeout (4 x 5 s with the test server's options) and a start and an end
  // make several.
  CHECK(took < std::chrono::seconds(15));
  dcpp::CheckpointManager restarted(store.options(root));
  restarted.wait_for_remote();
  CHECK(steps_of(restarted.list_remote()) == std::vector<int64_t>{1, 2});
}

TEST_CASE("a remote step whose bytes come back changed is passed over for the one before") {
  FaultyStore store;
  store.save_run(store.dir / "first", 2);
  S3Fault changed;  // every read of step 2's data comes back with one bit flipped
  changed.method = "GET";
  changed.path_contains = "step-00000002/__0_0.distcp";
  changed.corrupt_response_body = true;
  changed.times = 1000000;
  store.server.inject(changed);
  dcpp::CheckpointManager manager(store.options(store.dir / "new-machine"));
  dcpp::StateDict state = run_state(0, -1);
  try {
    manager.restore(state, dcpp::RestoreRequest().with_fall_back(false));
    FAIL("changed bytes were loaded");
  } catch (const dcpp::CheckpointError& error) {
    CHECK(error.kind() == dcpp::ErrorKind::kCorrupt);
    CHECK_THAT(std::string(error.what()), Catch::Contains("step-00000002"));
  }
  CHECK(resumed_run(manager) == std::make_pair(1, int64_t{1}));
}
