// Crash-state exploration of the CheckpointManager's commit (docs/reliability.md, "Crash states"):
// for every prefix of the file-system calls an operation makes under the root (a save and the
// pruning after it, a rollback's save replacing an abandoned step, a save without fsync, a memory
// tier's flush, a drain and its local pruning), the operation runs in a forked
// child that dies before that call, killed or with power lost (file_system_calls.h); then a
// restart in the parent must find only checkpoints that load bit for bit, and resume from the new
// step or the one before, never from a step that fails to load or from nothing.

#include "dcpp_test.h"
#include "file_system_calls.h"
#ifdef DCPP_S3_SERVER_DIR
#include "storage/s3_test_server.h"
#endif

#include <dcpp/checkpoint/checkpointer.h>
#include <dcpp/plugin/checkpoint_info.h>
#include <dcpp/plugin/checkpoint_manager.h>
#include <dcpp/plugin/memory_flush.h>
#include <dcpp/plugin/memory_tier.h>

#include <sys/wait.h>
#include <unistd.h>

#include <functional>
#include <set>
#include <sstream>
#include <utility>

namespace fs = std::filesystem;
using dcpp::test::TempDir;
using dcpp::test::crash_states::CrashMode;

namespace {

constexpr int64_t kValues = 1000;

// The state run `run` has at `step`: values no other (run, step) has, in two dtypes.
dcpp::StateDict state_of(int run, int64_t step) {
  const double base = static_cast<double>(1000 * (100 * run + step));
  dcpp::StateDict state;
  state.insert("model.weight", at::arange(kValues, at::kDouble) + base);
  state.insert("model.bias", (at::arange(kValues / 4, at::kFloat) + static_cast<float>(base)));
  state.insert("step", step);
  state.insert("run", static_cast<int64_t>(run));
  return state;
}

dcpp::StateDict empty_state() {
  dcpp::StateDict state;
  state.insert("model.weight", at::zeros({kValues}, at::kDouble));
  state.insert("model.bias", at::zeros({kValues / 4}, at::kFloat));
  state.insert("step", int64_t{-1});
  state.insert("run", int64_t{-1});
  return state;
}

// The (run, step) whose values `state` holds, after checking that every value is that pair's,
// bit for bit.
std::pair<int, int64_t> identify(const dcpp::StateDict& state) {
  const int run = static_cast<int>(state.at("run").value().toInt());
  const int64_t step = state.at("step").value().toInt();
  const dcpp::StateDict expected = state_of(run, step);
  for (const char* key : {"model.weight", "model.bias"}) {
    INFO(key << " of run " << run << ", step " << step);
    CHECK(at::equal(state.at(key).tensor(), expected.at(key).tensor()));
  }
  return {run, step};
}

dcpp::CheckpointManagerOptions options_for(const fs::path& root, int keep_latest,
                                           bool sync_files = true) {
  dcpp::CheckpointManagerOptions options =
      dcpp::CheckpointManagerOptions().with_root(root).with_async(false).with_retention(
          dcpp::RetentionPolicy().with_keep_latest(keep_latest));
  options.file_system.sync_files = sync_files;
  return options;
}

dcpp::SaveRequest request(int64_t step) {
  dcpp::SaveRequest r;
  r.step = step;
  return r;
}

// An operation on the root: prepares the state it starts from (never crashed), then acts (in the
// child, which calls `arm` once it reaches the part explored).
struct Scenario {
  int keep_latest = 2;
  // The restarted manager's options (options_for(root, keep_latest) when empty).
  std::function<dcpp::CheckpointManagerOptions(const fs::path& root)> restart_options;
  std::function<void(const fs::path& root)> prepare;
  std::function<void(const fs::path& root, const std::function<void()>& arm)> act;
  std::set<std::pair<int, int64_t>> resumable_after_crash;  // (run, step)
  std::pair<int, int64_t> resumed_after_success;
};

// What a restart finds under `root`: every complete checkpoint listed loads, bit for bit its own
// (run, step); returns what restore() resumes from, or (0, -1) for nothing.
std::pair<int, int64_t> restart(const fs::path& root, const Scenario& scenario) {
  dcpp::CheckpointManager manager(scenario.restart_options
                                      ? scenario.restart_options(root)
                                      : options_for(root, scenario.keep_latest));
  for (const dcpp::CheckpointInfo& info : dcpp::list_checkpoints(root)) {
    INFO("the listed checkpoint " << info.path.string());
    dcpp::StateDict state = empty_state();
    REQUIRE_NOTHROW(dcpp::load(state, info.path.string()));
    CHECK(identify(state).second == info.step);
  }
  dcpp::StateDict state = empty_state();
  const std::optional<dcpp::CheckpointInfo> info = manager.restore(state);
  if (!info) return {0, -1};
  return identify(state);
}

// How a child ended: true when it finished the operation, false when it died at the armed call.
bool run_child(const fs::path& root, long call, CrashMode mode, const Scenario& scenario) {
  std::fflush(nullptr);  // the child must not print the parent's buffered output again
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    int code = 0;
    try {
      scenario.act(root, [&] { dcpp::test::crash_states::crash_at(root, call, mode); });
    } catch (const std::exception& e) {
      std::fprintf(stderr, "the operation failed: %s\n", e.what());
      code = 3;
    }
    dcpp::test::crash_states::stop();
    std::fflush(nullptr);
    ::_exit(code);
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  if (WIFSIGNALED(status)) {
    REQUIRE(WTERMSIG(status) == SIGKILL);
    return false;
  }
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
  return true;
}

// The calls the operation makes, from a run with nothing armed to die (in a child too: the
// operation may leave state in the process that runs it, such as a memory tier's holder).
std::vector<std::string> recorded_calls(const fs::path& root, const Scenario& scenario) {
  const fs::path record = root.string() + ".calls";
  std::fflush(nullptr);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    int code = 0;
    try {
      scenario.act(root, [&] { dcpp::test::crash_states::watch(root); });
      std::string lines;
      for (const std::string& call : dcpp::test::crash_states::calls()) lines += call + "\n";
      dcpp::test::crash_states::stop();
      dcpp::test::write_file(record, lines);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "the recorded operation failed: %s\n", e.what());
      code = 3;
    }
    std::fflush(nullptr);
    ::_exit(code);
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
  std::vector<std::string> calls;
  std::istringstream lines(dcpp::test::read_file(record));
  for (std::string line; std::getline(lines, line);) calls.push_back(line);
  return calls;
}

std::string describe(const std::pair<int, int64_t>& resumed) {
  return "run " + std::to_string(resumed.first) + ", step " + std::to_string(resumed.second);
}

// Explores every crash state of `scenario` in `mode`; returns how many there were.
long explore(const Scenario& scenario, CrashMode mode) {
  TempDir dir;
  const fs::path start = dir / "start";
  scenario.prepare(start);
  const auto fresh_root = [&](long call) {
    const fs::path root = dir / ("root-" + std::to_string(call));
    fs::copy(start, root, fs::copy_options::recursive);
    return root;
  };
  const std::vector<std::string> calls = recorded_calls(fresh_root(0), scenario);
  REQUIRE(calls.size() > 5);
  long call = 1;
  for (;; ++call) {
    const fs::path root = fresh_root(call);
    const bool finished = run_child(root, call, mode, scenario);
    INFO("crashed before call " << call << " of " << calls.size() << ": "
                                << (call <= static_cast<long>(calls.size()) ? calls[call - 1]
                                                                            : "(none)"));
    const std::pair<int, int64_t> resumed = restart(root, scenario);
    INFO("resumed from " << describe(resumed));
    if (finished) {
      CHECK(resumed == scenario.resumed_after_success);
      fs::remove_all(root);
      break;
    }
    CHECK(scenario.resumable_after_crash.count(resumed) == 1);
    fs::remove_all(root);
  }
  CHECK(call == static_cast<long>(calls.size()) + 1);  // the same calls as the recorded run
  return call - 1;
}

Scenario save_and_prune() {
  Scenario s;
  s.prepare = [](const fs::path& root) {
    dcpp::CheckpointManager manager(options_for(root, 2));
    manager.save(state_of(1, 1), request(1));
    manager.save(state_of(1, 2), request(2));
  };
  s.act = [](const fs::path& root, const std::function<void()>& arm) {
    arm();
    dcpp::CheckpointManager manager(options_for(root, 2));
    manager.save(state_of(1, 3), request(3));  // then step 1 is pruned on the worker
  };
  s.resumable_after_crash = {{1, 2}, {1, 3}};
  s.resumed_after_success = {1, 3};
  return s;
}

// The memory tier's job of the flush scenario: a name of its own, the same for every copy of the
// root (a job's name is otherwise derived from its root).
const std::string& flush_job() {
  static const std::string job =
      "crash-states-flush-" + std::to_string(::getpid());  // the parent's
  return job;
}

// A dead job's newest memory step (3) committed to disk beside its disk steps 1 and 2
// (flush_memory_tier, as dcpp-launch does when a job dies).
Scenario memory_flush() {
  Scenario s;
  s.prepare = [](const fs::path& root) {
    dcpp::CheckpointManagerOptions options = options_for(root, 2);
    options.memory = dcpp::MemoryTierOptions().with_every_steps(1).with_job(flush_job());
    dcpp::CheckpointManager manager(options);
    manager.save(state_of(1, 1), request(1));
    manager.save(state_of(1, 2), request(2));
    manager.save_to_memory(state_of(1, 3), request(3));  // then the job dies
    manager.wait_for_memory_copy();
  };
  s.act = [](const fs::path& root, const std::function<void()>& arm) {
    arm();
    const dcpp::MemoryFlushResult flushed = dcpp::flush_memory_tier(
        dcpp::MemoryFlushOptions().with_root(root).with_job(flush_job()).with_keep_regions(true));
    if (!flushed.written) throw std::runtime_error(flushed.message);
  };
  s.resumable_after_crash = {{1, 2}, {1, 3}};
  s.resumed_after_success = {1, 3};
  return s;
}

#ifdef DCPP_S3_SERVER_DIR
// The drain to a remote tier of steps 1 to 3 that a job without one committed, then the local
// pruning of steps 1 and 2 once the store holds them (keep 1 locally): each root's copy drains to
// a prefix of its own, named after it.
dcpp::CheckpointManagerOptions drained_options(const fs::path& root) {
  static const std::string bucket = dcpp::test::S3TestServer::get().create_bucket("crash-drain");
  dcpp::CheckpointManagerOptions options = options_for(root, 1);
  // A restart is the same job as the one killed: it takes over the lease the killed one held.
  options.remote = dcpp::RemoteTierOptions()
                       .with_url("s3://" + bucket + "/" + root.parent_path().filename().string() +
                                 "/" + root.filename().string())
                       .with_s3(dcpp::test::S3TestServer::get().options())
                       .with_job_id("crash-states-drain");
  return options;
}

Scenario drain() {
  Scenario s;
  s.prepare = [](const fs::path& root) {
    dcpp::CheckpointManager manager(options_for(root, 5));
    for (int64_t step = 1; step <= 3; ++step) manager.save(state_of(1, step), request(step));
  };
  s.act = [](const fs::path& root, const std::function<void()>& arm) {
    const dcpp::CheckpointManagerOptions options = drained_options(root);
    arm();
    dcpp::CheckpointManager manager(options);  // its first drain pass copies, then prunes
    manager.wait_for_remote();
  };
  s.restart_options = drained_options;
  s.resumable_after_crash = {{1, 3}};  // step 3 is local until the store holds it
  s.resumed_after_success = {1, 3};
  return s;
}
#endif

// sync_files off: nothing is fsynced, so a power loss empties every file the save wrote.
Scenario save_without_fsync() {
  Scenario s = save_and_prune();
  s.act = [](const fs::path& root, const std::function<void()>& arm) {
    arm();
    dcpp::CheckpointManager manager(options_for(root, 2, false));
    manager.save(state_of(1, 3), request(3));
  };
  return s;
}

Scenario rollback_save() {
  Scenario s;
  s.keep_latest = 5;
  s.prepare = [](const fs::path& root) {
    dcpp::CheckpointManager manager(options_for(root, 5));
    for (int64_t step = 1; step <= 3; ++step) manager.save(state_of(1, step), request(step));
  };
  s.act = [](const fs::path& root, const std::function<void()>& arm) {
    dcpp::CheckpointManager manager(options_for(root, 5));
    dcpp::StateDict state = empty_state();
    manager.restore(state, dcpp::RestoreRequest().with_step(2));  // a rollback: step 3 is newer
    arm();
    // Run 2's step 3 replaces run 1's, which this run abandons.
    manager.save(state_of(2, 3), request(3));
  };
  // Until run 2's step 3 is committed run 1's is not abandoned: a restart resumes from it.
  s.resumable_after_crash = {{1, 3}, {2, 3}};
  s.resumed_after_success = {2, 3};
  return s;
}

}  // namespace

TEST_CASE("every crash state of a save and the pruning after it restarts from a complete step") {
  const CrashMode mode = GENERATE(CrashMode::kProcessKilled, CrashMode::kPowerLost);
  const long states = explore(save_and_prune(), mode);
  std::printf("save and prune, %s: %ld crash states explored\n",
              mode == CrashMode::kPowerLost ? "power lost" : "process killed", states);
}

TEST_CASE("every crash state of a rollback's save restarts from a complete step of one run") {
  const CrashMode mode = GENERATE(CrashMode::kProcessKilled, CrashMode::kPowerLost);
  const long states = explore(rollback_save(), mode);
  std::printf("rollback save, %s: %ld crash states explored\n",
              mode == CrashMode::kPowerLost ? "power lost" : "process killed", states);
}

TEST_CASE("every crash state of a save without fsync restarts from a complete step") {
  // Power lost: what was written is gone, and an empty `.metadata` must not list as complete.
  const long states = explore(save_without_fsync(), CrashMode::kPowerLost);
  std::printf("save without fsync, power lost: %ld crash states explored\n", states);
}

TEST_CASE("every crash state of a memory tier's flush to disk restarts from a complete step") {
  const CrashMode mode = GENERATE(CrashMode::kProcessKilled, CrashMode::kPowerLost);
  const long states = explore(memory_flush(), mode);
  std::printf("memory flush, %s: %ld crash states explored\n",
              mode == CrashMode::kPowerLost ? "power lost" : "process killed", states);
  // The regions kept for every crash state go now.
  TempDir scratch;
  dcpp::flush_memory_tier(
      dcpp::MemoryFlushOptions().with_root(scratch.path()).with_job(flush_job()));
}

#ifdef DCPP_S3_SERVER_DIR
TEST_CASE("every crash state of a drain to the remote tier and its local pruning restarts") {
  drained_options("prefix-made-before-any-fork");  // the bucket, made in this process
  const CrashMode mode = GENERATE(CrashMode::kProcessKilled, CrashMode::kPowerLost);
  const long states = explore(drain(), mode);
  std::printf("drain and local pruning, %s: %ld crash states explored\n",
              mode == CrashMode::kPowerLost ? "power lost" : "process killed", states);
}
#endif
