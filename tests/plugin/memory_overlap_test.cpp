// The memory tier's copy while training goes on (MemoryTierOptions::copy_while_training): each
// memory step holds the state of its step's end although the optimizer changes it right after
// CheckpointCallback::on_before_optimizer_step; a loop that never calls that hook is waited for
// at each step end; one that stops calling it is stopped, its memory steps removed; a background
// copy that fails is recorded; restore() waits for the copy in flight.

#include "dcpp_test.h"
#include "manager_test_support.h"

#include <dcpp/core/checkpoint_error.h>
#include <dcpp/plugin/checkpoint_callback.h>
#include <dcpp/plugin/checkpoint_manager.h>
#include <dcpp/storage/memory_slots.h>

#include <unistd.h>

#include <map>

namespace fs = std::filesystem;
using dcpp::test::request;
using dcpp::test::TempDir;

namespace {

constexpr int kTensors = 8;
constexpr int64_t kElements = int64_t{1} << 20;  // 4 MiB a tensor: a copy of 32 MiB takes a while

// A memory tier copying while training goes on, of this test's own job name (its regions removed
// when the test ends).
struct OverlapJob {
  explicit OverlapJob(const std::string& what)
      : name("overlap-" + what + "-" + std::to_string(::getpid())) {
    release();
  }
  ~OverlapJob() { release(); }
  void release() const { dcpp::MemorySlots(name, 0, 1).release(); }
  dcpp::MemoryTierOptions memory() const {
    return dcpp::MemoryTierOptions().with_every_steps(1).with_job(name).with_copy_while_training(
        true);
  }
  dcpp::CheckpointManagerOptions options(const fs::path& root) const {
    return dcpp::CheckpointManagerOptions().with_root(root).with_async(false).with_memory(memory());
  }
  std::string name;
};

// A training state of kTensors tensors of random values.
void add_training_state(dcpp::TrainingContext& context) {
  for (int i = 0; i < kTensors; ++i) {
    context.state.insert("layer" + std::to_string(i) + ".weight", at::randn({kElements}));
  }
}

dcpp::StateDict zeros_like(const dcpp::StateDict& state) {
  dcpp::StateDict zeros;
  for (const auto& item : state) zeros.insert(item.key, at::zeros_like(item.value.tensor()));
  return zeros;
}

std::vector<at::Tensor> snapshot(const dcpp::StateDict& state) {
  std::vector<at::Tensor> copies;
  for (const auto& item : state) copies.push_back(item.value.tensor().clone());
  return copies;
}

bool equals_snapshot(const dcpp::StateDict& state, const std::vector<at::Tensor>& expected) {
  std::size_t i = 0;
  for (const auto& item : state) {
    if (!dcpp::test::bitwise_equal(item.value.tensor(), expected.at(i++))) return false;
  }
  return i == expected.size();
}

// The optimizer's step: every tensor of the state changed in place, every byte of it.
void optimizer_step(dcpp::TrainingContext& context) {
  for (const auto& item : context.state) item.value.tensor().add_(1.0);
}

dcpp::CheckpointCallbackOptions no_resume() {
  return dcpp::CheckpointCallbackOptions().with_resume_enabled(false).with_save_at_end(false);
}

}  // namespace

TEST_CASE("copy_while_training: each memory step holds its step's end, bit for bit") {
  // A loop that calls on_before_optimizer_step (the copy overlaps the step after it), and one
  // that never does (every copy is waited for at its step end).
  const bool calls_hook = GENERATE(true, false);
  INFO("the loop calls on_before_optimizer_step: " << calls_hook);
  TempDir dir;
  OverlapJob job(calls_hook ? "hook" : "nohook");
  dcpp::TrainingContext context;
  add_training_state(context);
  std::map<int64_t, std::vector<at::Tensor>> at_step_end;
  {
    auto manager = std::make_shared<dcpp::CheckpointManager>(job.options(dir / "ckpt"));
    dcpp::CheckpointCallback callback(manager, no_resume());
    for (int64_t step = 1; step <= 6; ++step) {
      if (calls_hook) callback.on_before_optimizer_step(context);
      optimizer_step(context);  // right after the hook: the copy of the step before has ended
      context.step = step;
      at_step_end[step] = snapshot(context.state);
      callback.on_step_end(context);
    }
    manager->wait_for_memory_copy();
    const auto history = manager->history();
    REQUIRE(history.size() == 6);
    for (const dcpp::SaveRecord& record : history) {
      INFO("step " << record.step << ": " << record.error);
      CHECK(record.in_memory);
      CHECK(record.ok);
    }
  }
  // A restarted process: steps 6 and 5 from memory, each as it was at its step's end.
  dcpp::CheckpointManager manager(job.options(dir / "ckpt"));
  for (const int64_t step : {6, 5}) {
    dcpp::StateDict restored = zeros_like(context.state);
    const auto info = manager.restore(restored, dcpp::RestoreRequest().with_step(step));
    REQUIRE(info);
    CHECK(info->path.string().rfind("/dev/shm/dcpp." + job.name + ".0.", 0) == 0);
    CHECK(equals_snapshot(restored, at_step_end[step]));
  }
}

TEST_CASE("copy_while_training: a loop that stops calling on_before_optimizer_step is stopped") {
  TempDir dir;
  OverlapJob job("skipped");
  dcpp::TrainingContext context;
  add_training_state(context);
  auto manager =
      std::make_shared<dcpp::CheckpointManager>(job.options(dir / "ckpt").with_save_every_steps(2));
  dcpp::CheckpointCallback callback(manager, no_resume());
  std::vector<at::Tensor> at_step_2;
  for (int64_t step = 1; step <= 2; ++step) {
    callback.on_before_optimizer_step(context);
    optimizer_step(context);
    context.step = step;
    if (step == 2) at_step_2 = snapshot(context.state);
    callback.on_step_end(context);  // step 2: to disk as well
  }
  optimizer_step(context);  // without the hook: memory step 2 may be copied as this changes it
  context.step = 3;
  const dcpp::CheckpointError error = dcpp::test::error_of([&] { callback.on_step_end(context); });
  CHECK(error.kind() == dcpp::ErrorKind::kUsage);
  CHECK_THAT(error.what(), Catch::Contains("step 3 ended without "
                                           "CheckpointCallback::on_before_optimizer_step,"
                                           " while memory step 2 was being copied"));
  // The memory steps are gone; the disk's step 2 is intact.
  CHECK(dcpp::MemorySlots(job.name, 0, 1).complete_steps().empty());
  dcpp::StateDict restored = zeros_like(context.state);
  const auto info = manager->restore(restored);
  REQUIRE(info);
  CHECK(info->path == dir / "ckpt" / "step-00000002");
  CHECK(equals_snapshot(restored, at_step_2));
}

TEST_CASE("copy_while_training: a failed copy is recorded; restore waits for the copy queued") {
  TempDir dir;
  OverlapJob job("queued");
  dcpp::TrainingContext context;
  add_training_state(context);
  const int64_t state_bytes = kTensors * kElements * 4;
  dcpp::CheckpointManager manager(
      dcpp::CheckpointManagerOptions()
          .with_root(dir / "ckpt")
          .with_async(false)
          .with_memory(job.memory().with_max_bytes_per_rank(state_bytes + (1 << 20))));
  // Over the cap: queued (true), then recorded as failed when the copy ran.
  dcpp::StateDict larger = context.state;
  larger.insert("extra", at::ones({kElements / 2}));
  REQUIRE(manager.save_to_memory(larger, request(1)));
  manager.wait_for_memory_copy();
  REQUIRE(manager.history().size() == 1);
  CHECK_FALSE(manager.history().back().ok);
  CHECK_THAT(manager.history().back().error,
             Catch::Contains("MemoryTierOptions::max_bytes_per_rank"));
  // A step queued, then restored at once: restore waits for its copy, and it is the newest.
  const std::vector<at::Tensor> at_step_2 = snapshot(context.state);
  REQUIRE(manager.save_to_memory(context.state, request(2)));
  dcpp::StateDict restored = zeros_like(context.state);
  const auto info = manager.restore(restored);
  REQUIRE(info);
  CHECK(info->step == 2);
  CHECK(equals_snapshot(restored, at_step_2));
  CHECK(manager.history().back().ok);
}
