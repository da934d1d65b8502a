// CheckpointManager and CheckpointCallback in one process: retention on real checkpoints, commit
// by rename (latest() never sees an incomplete checkpoint), resume bit for bit, content metadata
// without tensors, preemption, the phase log.

#include "dcpp_test.h"
#include "manager_test_support.h"

#include <dcpp/checkpoint/checkpointer.h>
#include <dcpp/plugin/checkpoint_callback.h>
#include <dcpp/plugin/checkpoint_manager.h>
#include <dcpp/plugin/preemption.h>
#include <dcpp/plugin/training_state.h>
#include <dcpp/state_dict/plain_layout.h>
#include <dcpp/state_dict/stateful_adapters.h>

#include <torch/nn/modules/linear.h>
#include <torch/optim/adam.h>

#include <csignal>
#include <fstream>
#include <optional>
#include <set>

namespace fs = std::filesystem;
using dcpp::test::request;
using dcpp::test::steps_of;
using dcpp::test::TempDir;

namespace {

dcpp::StateDict small_state(int64_t step) {
  dcpp::StateDict state;
  state.insert("weight", at::arange(6, at::kFloat).add(step));
  state.insert("step", step);
  dcpp::StateDict loader;
  loader.insert("epoch", step * 10);
  loader.insert("order", dcpp::StateList{step, "shuffled"});
  state.insert("loader", loader);
  return state;
}

// A small model trained with Adam: everything a resumed run must continue exactly.
struct Trainer {
  torch::nn::Linear model{nullptr};
  std::shared_ptr<torch::optim::Adam> optimizer;
  std::shared_ptr<int64_t> samples = std::make_shared<int64_t>(0);
  dcpp::TrainingContext context;

  explicit Trainer(uint64_t seed) {
    torch::manual_seed(seed);
    model = torch::nn::Linear(4, 3);
    optimizer =
        std::make_shared<torch::optim::Adam>(model->parameters(), torch::optim::AdamOptions(0.05));
    auto layout = dcpp::plain_layout(*model);
    context.add("model", dcpp::make_model_stateful(layout))
        .add("optim", dcpp::make_optimizer_stateful(layout, optimizer))
        .add("data_loader", dcpp::make_counter_stateful(samples))
        .add("rng", dcpp::make_rng_stateful());
  }
  void step() {
    at::Tensor x = at::randn({5, 4});  // from the RNG the checkpoint restores
    optimizer->zero_grad();
    at::Tensor loss = model->forward(x).pow(2).mean();
    loss.backward();
    optimizer->step();
    *samples += 5;
    context.step += 1;
    context.metrics["loss"] = loss.item<double>();
  }
};

}  // namespace

TEST_CASE("retention keeps the latest K and every P-th step and the best K by a metric") {
  TempDir dir;
  dcpp::CheckpointManagerOptions options;
  options.with_root(dir.path())
      .with_async(false)
      .with_retention(
          dcpp::RetentionPolicy().with_keep_latest(2).with_keep_every_steps(4).with_keep_best(
              1, "loss"));
  dcpp::CheckpointManager manager(options);
  const double losses[] = {0, 5, 4, 0.5, 3, 2, 1.5, 1.2, 1.1, 1.0, 0.9};
  for (int64_t step = 1; step <= 10; ++step) {
    manager.save(small_state(step), request(step, losses[step]));
  }
  manager.wait();  // pruning runs on the manager's thread
  // latest 2: 9, 10; every 4th: 4, 8; best loss: 3 (0.5)
  CHECK(steps_of(manager.list()) == std::vector<int64_t>{3, 4, 8, 9, 10});
  for (const auto& entry : fs::directory_iterator(dir.path())) {
    CHECK(entry.path().filename().string().find(".deleting") == std::string::npos);
  }
  // What is kept loads.
  dcpp::StateDict loaded = small_state(0);
  dcpp::RestoreRequest which;
  which.step = 8;
  REQUIRE(manager.restore(loaded, which));
  CHECK(dcpp::test::bitwise_equal(loaded.at("weight").tensor(), at::arange(6, at::kFloat).add(8)));
  // Plain values come back too, at any depth, not only tensors (loaded in place).
  CHECK(loaded.at("step").value().toInt() == 8);
  CHECK(loaded.at("loader").dict().at("epoch").value().toInt() == 80);
  CHECK(loaded.at("loader").dict().at("order").list()[0].value().toInt() == 8);
}

TEST_CASE("checkpoints_to_delete never deletes the latest and keeps everything without rules") {
  std::vector<dcpp::CheckpointInfo> infos(3);
  for (int i = 0; i < 3; ++i) infos[i].step = 10 * (i + 1);
  CHECK(dcpp::checkpoints_to_delete(infos, {}).empty());
  dcpp::RetentionPolicy best;
  best.with_keep_best(1, "accuracy", /*lower=*/false);
  infos[0].metrics["accuracy"] = 0.9;
  infos[1].metrics["accuracy"] = 0.5;
  CHECK(steps_of(dcpp::checkpoints_to_delete(infos, best)) == std::vector<int64_t>{20});
}

TEST_CASE("latest never returns an incomplete checkpoint and the next manager removes it") {
  TempDir dir;
  {
    dcpp::CheckpointManager manager(
        dcpp::CheckpointManagerOptions().with_root(dir.path()).with_async(false));
    manager.save(small_state(1), request(1));
    // A save that fails while writing: its temporary directory cannot be created.
    dcpp::test::write_file(dir / "step-00000002.incomplete", "in the way");
    CHECK_THROWS_AS(manager.save(small_state(2), request(2)), dcpp::CheckpointError);
    REQUIRE(manager.latest());
    CHECK(manager.latest()->step == 1);
  }
  {
    // An async save that fails the same way: the error comes through the future and wait().
    dcpp::CheckpointManager manager(
        dcpp::CheckpointManagerOptions().with_root(dir.path()).with_async(true));
    CHECK(!fs::exists(dir / "step-00000002.incomplete"));  // cleaned on start
    dcpp::test::write_file(dir / "step-00000003.incomplete", "in the way");
    dcpp::ManagedSave saving = manager.save(small_state(3), request(3));
    // wait() rethrows the save's own error, kind included (not a copy of its message).
    auto kind_of = [](const auto& call) {
      try {
        call();
      } catch (const dcpp::CheckpointError& error) {
        return std::optional<dcpp::ErrorKind>(error.kind());
      }
      return std::optional<dcpp::ErrorKind>();
    };
    const auto committed_kind = kind_of([&] { saving.committed.wait(); });
    REQUIRE(committed_kind);
    CHECK(*committed_kind != dcpp::ErrorKind::kUsage);
    CHECK(kind_of([&] { manager.wait(); }) == committed_kind);
    CHECK_NOTHROW(manager.wait());  // reported once
    CHECK(manager.latest()->step == 1);
  }
  // A job killed after DCP's commit but before the rename: `.metadata` is there, yet the
  // directory is not a checkpoint.
  fs::copy(dir / "step-00000001", dir / "step-00000004.incomplete", fs::copy_options::recursive);
  fs::remove(dir / "step-00000004.incomplete" / "dcpp_checkpoint.json");
  CHECK(dcpp::latest_checkpoint(dir.path())->step == 1);
  CHECK(steps_of(dcpp::list_checkpoints(dir.path())) == std::vector<int64_t>{1});
  dcpp::CheckpointManager next(dcpp::CheckpointManagerOptions().with_root(dir.path()));
  CHECK(!fs::exists(dir / "step-00000004.incomplete"));
  CHECK(!fs::exists(dir / "step-00000003.incomplete"));
  CHECK(fs::exists(dir / "step-00000001" / ".metadata"));
}

TEST_CASE(
    "resume through the callback restores model and optimizer and data loader and RNG bit for "
    "bit") {
  TempDir dir;
  auto options = dcpp::CheckpointManagerOptions().with_root(dir.path()).with_save_every_steps(3);
  dcpp::CheckpointCallbackOptions callback_options;
  callback_options.save_at_end = false;
  std::vector<at::Tensor> uninterrupted;
  {
    Trainer run(1);
    dcpp::CheckpointCallback checkpoints(std::make_shared<dcpp::CheckpointManager>(options),
                                         callback_options);
    checkpoints.on_train_begin(run.context);
    CHECK(!checkpoints.resumed_from());
    while (run.context.step < 5) {
      run.step();
      checkpoints.on_step_end(run.context);
    }
    checkpoints.on_train_end(run.context);
    for (const auto& p : run.model->parameters()) uninterrupted.push_back(p.detach().clone());
    CHECK(*run.samples == 25);
  }
  Trainer resumed(2);  // other initial values, other RNG
  dcpp::CheckpointCallback checkpoints(std::make_shared<dcpp::CheckpointManager>(options),
                                       callback_options);
  checkpoints.on_train_begin(resumed.context);
  REQUIRE(checkpoints.resumed_from());
  CHECK(resumed.context.step == 3);
  CHECK(*resumed.samples == 15);
  while (resumed.context.step < 5) {
    resumed.step();
    checkpoints.on_step_end(resumed.context);
  }
  const auto params = resumed.model->parameters();
  REQUIRE(params.size() == uninterrupted.size());
  for (size_t i = 0; i < params.size(); ++i) {
    CHECK(dcpp::test::bitwise_equal(params[i].detach(), uninterrupted[i]));
  }

  SECTION("exclude_from_loading leaves those keys as they are") {
    Trainer other(3);
    *other.samples = 999;
    dcpp::CheckpointManager manager(options);
    dcpp::RestoreRequest which;
    which.exclude_from_loading = {"data_loader", "optim"};
    auto info = manager.restore(other.context.state, which);
    REQUIRE(info);
    CHECK(info->step == 3);
    CHECK(*other.samples == 999);
    CHECK(dcpp::test::bitwise_equal(
        other.model->weight.detach(),
        dcpp::load_from_keys(info->path, {"model"}).at("model").dict().at("weight").tensor()));
  }
}

TEST_CASE("content metadata is readable without loading any tensor") {
  TempDir dir;
  dcpp::CheckpointManager manager(
      dcpp::CheckpointManagerOptions().with_root(dir.path()).with_async(true));
  dcpp::SaveRequest r = request(7, 0.25);
  r.epoch = 2;
  r.content["version"] = "dcpp-demo 1.0";
  r.content["config"] = R"({"lr": 0.05, "layers": [4, 3]})";
  r.content["data_loader_epoch"] = "2";
  dcpp::ManagedSave saving = manager.save(small_state(7), r);
  saving.committed.wait();
  CHECK(saving.path == dir / "step-00000007");
  // Without the data files, the manifest still answers.
  for (const auto& entry : fs::directory_iterator(saving.path)) {
    if (entry.path().extension() == ".distcp") fs::remove(entry.path());
  }
  const dcpp::CheckpointInfo info = dcpp::read_checkpoint_info(saving.path);
  CHECK(info.step == 7);
  CHECK(info.epoch == 2);
  CHECK(info.metrics.at("loss") == 0.25);
  CHECK(info.content == r.content);
  CHECK(info.kind == dcpp::CheckpointKind::kFull);
  // The manifest names the kind as it always has (old checkpoints and other readers rely on it).
  CHECK(dcpp::test::read_file(saving.path / "dcpp_checkpoint.json").find("\"kind\": \"full\"") !=
        std::string::npos);
  // What the checkpoint stores: the tensor's bytes and the pickled non-tensor values.
  int64_t stored = 0;
  for (const auto& [index, storage] : dcpp::read_metadata(saving.path).storage_data) {
    stored += storage.length;
  }
  CHECK(stored > 6 * 4);
  CHECK(info.bytes == stored);
}

TEST_CASE("a preemption request saves at the step boundary and stops the loop") {
  TempDir dir;
  dcpp::clear_preemption_request();
  Trainer run(1);
  dcpp::CheckpointCallback checkpoints(std::make_shared<dcpp::CheckpointManager>(
      dcpp::CheckpointManagerOptions().with_root(dir.path()).with_save_every_steps(100)));
  checkpoints.on_train_begin(run.context);
  while (run.context.step < 10 && !run.context.should_stop()) {
    run.step();
    if (run.context.step == 4) std::raise(SIGUSR1);  // the handler only sets the flag
    checkpoints.on_step_end(run.context);
  }
  checkpoints.on_train_end(run.context);
  dcpp::clear_preemption_request();
  CHECK(checkpoints.preempted());
  CHECK(run.context.step == 4);
  CHECK(steps_of(dcpp::list_checkpoints(dir.path())) == std::vector<int64_t>{4});
}

namespace {
void users_own_handler(int) {}
}  // namespace

TEST_CASE("uninstalling the preemption handler puts back the handler that was there before") {
  struct sigaction users {};
  users.sa_handler = users_own_handler;
  sigemptyset(&users.sa_mask);
  struct sigaction saved {};
  REQUIRE(::sigaction(SIGUSR2, &users, &saved) == 0);
  dcpp::install_preemption_handler({SIGUSR2});
  dcpp::install_preemption_handler({SIGUSR2});  // twice: the user's handler is still the one kept
  struct sigaction now {};
  REQUIRE(::sigaction(SIGUSR2, nullptr, &now) == 0);
  CHECK(now.sa_handler != users_own_handler);
  dcpp::uninstall_preemption_handler({SIGUSR2});
  REQUIRE(::sigaction(SIGUSR2, nullptr, &now) == 0);
  CHECK(now.sa_handler == users_own_handler);
  REQUIRE_THROWS_WITH(dcpp::install_preemption_handler({0}), Catch::Contains("not a signal"));
  ::sigaction(SIGUSR2, &saved, nullptr);
}

TEST_CASE("each save logs its phases to the metrics file and the export is cast") {
  TempDir dir;
  dcpp::CheckpointManager manager(dcpp::CheckpointManagerOptions()
                                      .with_root(dir / "ckpt")
                                      .with_metrics_file(dir / "metrics.jsonl"));
  manager.save(small_state(1), request(1)).committed.wait();
  dcpp::StateDict model;
  model.insert("model", small_state(1));
  const fs::path exported = manager.export_state(model, request(1), at::kBFloat16);
  manager.wait();
  const std::string log = dcpp::test::read_file(dir / "metrics.jsonl");
  for (const char* phase : {"plan", "stage", "write", "commit"}) {
    CHECK(log.find(std::string("\"phase\":\"") + phase + "\"") != std::string::npos);
  }
  CHECK(log.find("\"gb_per_s\"") != std::string::npos);
  const auto history = manager.history();
  REQUIRE(history.size() == 2);
  CHECK(history[0].ok);
  CHECK(history[0].kind == dcpp::CheckpointKind::kFull);
  CHECK(history[1].kind == dcpp::CheckpointKind::kExport);
  CHECK(history[0].bytes == 24);  // the state's tensors
  // What the only rank wrote: every stored item.
  int64_t stored = 0;
  for (const auto& [index, storage] :
       dcpp::read_metadata(dir / "ckpt" / "step-00000001").storage_data) {
    stored += storage.length;
  }
  CHECK(history[0].written_bytes == stored);
  CHECK(dcpp::read_checkpoint_info(dir / "ckpt" / "step-00000001").bytes == stored);
  // A commit moves no data: its record says 0 bytes, not the state's size over its few seconds.
  CHECK(log.find("\"bytes\":0,\"event\":\"end\",\"gb_per_s\":0.0,\"operation\":\"save\","
                 "\"path\":\"" +
                 (dir / "ckpt" / "step-00000001").string() + "\",\"phase\":\"commit\"") !=
        std::string::npos);
  CHECK(dcpp::read_checkpoint_info(exported).kind == dcpp::CheckpointKind::kExport);
  CHECK(dcpp::test::read_file(exported / "dcpp_checkpoint.json").find("\"kind\": \"export\"") !=
        std::string::npos);
  dcpp::StateDict loaded = dcpp::load_from_keys(exported);
  CHECK(loaded.at("model").dict().at("weight").tensor().scalar_type() == at::kBFloat16);
  CHECK(steps_of(manager.list()) == std::vector<int64_t>{1});  // exports are not resumable
}

TEST_CASE("time-based saving follows the manager's clock, counted from the last save") {
  TempDir dir;
  using Clock = std::chrono::steady_clock;
  auto now = std::make_shared<Clock::time_point>(Clock::time_point{});
  auto advance = [now](double seconds) {
    *now += std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  };
  auto manager = std::make_shared<dcpp::CheckpointManager>(dcpp::CheckpointManagerOptions()
                                                               .with_root(dir.path())
                                                               .with_save_every_seconds(60)
                                                               .with_clock([now] { return *now; }));

  SECTION("is_save_due turns true after T seconds, and a save starts the count again") {
    advance(59.5);
    CHECK(!manager->is_save_due(1));
    advance(0.5);
    CHECK(manager->is_save_due(2));
    manager->save(small_state(2), request(2)).committed.wait();
    CHECK(!manager->is_save_due(3));
    advance(59.9);
    CHECK(!manager->is_save_due(4));
    advance(0.1);
    CHECK(manager->is_save_due(5));
  }

  SECTION("the callback saves at the first step boundary after each interval") {
    Trainer run(1);
    dcpp::CheckpointCallbackOptions callback_options;
    callback_options.save_at_end = false;
    dcpp::CheckpointCallback checkpoints(manager, callback_options);
    checkpoints.on_train_begin(run.context);
    while (run.context.step < 10) {
      run.step();
      advance(25);  // every step takes 25 s: due at 75 s (step 3), 150 s (step 6), 225 s (step 9)
      checkpoints.on_step_end(run.context);
    }
    manager->wait();
    CHECK(steps_of(dcpp::list_checkpoints(dir.path())) == std::vector<int64_t>{3, 6, 9});
  }
}

TEST_CASE("a failed save is not remembered: saving the step again writes it") {
  struct Flaky : dcpp::Stateful {
    int failures = 1;
    dcpp::StateDict state_dict() override {
      if (failures > 0) {
        --failures;
        throw std::runtime_error("not ready yet");
      }
      return small_state(7);
    }
    void load_state_dict(const dcpp::StateDict&) override {}
  };
  for (bool async : {false, true}) {
    TempDir dir;
    dcpp::CheckpointManager manager(
        dcpp::CheckpointManagerOptions().with_root(dir.path()).with_async(async));
    dcpp::StateDict state;
    state.insert("flaky", std::make_shared<Flaky>());
    REQUIRE_THROWS_WITH(manager.save(state, request(7)), Catch::Contains("not ready yet"));
    const dcpp::ManagedSave second = manager.save(state, request(7));
    CHECK_FALSE(second.already_saved);
    second.committed.wait();
    REQUIRE(steps_of(manager.list()) == std::vector<int64_t>{7});
    const dcpp::StateDict saved = dcpp::load_from_keys(manager.latest()->path, {"flaky"});
    CHECK(dcpp::test::bitwise_equal(saved.at("flaky").dict().at("weight").tensor(),
                                    small_state(7).at("weight").tensor()));
    CHECK(manager.save(state, request(7)).already_saved);  // committed now: skipped, as promised
  }
}

// 0.1's name, which still works until 0.3.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
TEST_CASE("ManagedSave::skipped reads as already_saved, deprecated") {
  TempDir dir;
  dcpp::CheckpointManager manager(dcpp::CheckpointManagerOptions().with_root(dir.path()));
  const dcpp::ManagedSave first = manager.save(small_state(1), request(1));
  CHECK_FALSE(first.already_saved);
  CHECK_FALSE(static_cast<bool>(first.skipped));
  const dcpp::ManagedSave again = manager.save(small_state(1), request(1));
  CHECK(again.already_saved);
  CHECK(static_cast<bool>(again.skipped));
}
#pragma GCC diagnostic pop

TEST_CASE("async saves failing in a row stop the training loop on the next step end") {
  TempDir dir;
  auto manager = std::make_shared<dcpp::CheckpointManager>(dcpp::CheckpointManagerOptions()
                                                               .with_root(dir.path())
                                                               .with_save_every_steps(1)
                                                               .with_async(true));
  // A file where a step's temporary directory goes: that step's upload fails in the background.
  const auto block = [&](int64_t step) {
    std::ofstream(dir / (dcpp::step_directory_name(step) + ".incomplete")) << "in the way";
  };
  // The upload's outcome recorded before the next step end, as time passing would.
  const auto let_uploads_finish = [&] {
    try {
      manager->wait();
    } catch (const dcpp::CheckpointError&) {
    }
  };
  Trainer run(1);
  dcpp::CheckpointCallbackOptions options;
  options.max_consecutive_failed_saves = 2;
  dcpp::CheckpointCallback checkpoints(manager, options);
  checkpoints.on_train_begin(run.context);
  block(1);
  block(3);
  block(4);
  for (int64_t step = 1; step <= 4; ++step) {  // 1 fails, 2 commits (the count restarts), 3, 4 fail
    run.step();
    checkpoints.on_step_end(run.context);
    let_uploads_finish();
  }
  CHECK(steps_of(manager->list()) == std::vector<int64_t>{2});
  run.step();
  REQUIRE_THROWS_WITH(
      checkpoints.on_step_end(run.context),
      Catch::Contains("2 checkpoint saves in a row failed (steps 3, 4), the last with: ") &&
          Catch::Contains(dcpp::step_directory_name(4) + ".incomplete") &&
          Catch::Contains("max_consecutive_failed_saves"));
  CHECK(steps_of(manager->list()) == std::vector<int64_t>{2});  // step 5 was not saved

  // 0: failures are only logged.
  options.max_consecutive_failed_saves = 0;
  dcpp::CheckpointCallback tolerant(manager, options);
  tolerant.on_step_end(run.context);
  let_uploads_finish();
  CHECK(steps_of(manager->list()) == std::vector<int64_t>{2, 5});
}

TEST_CASE("require_resume refuses to start fresh on a root without a checkpoint") {
  TempDir dir;
  Trainer run(1);
  dcpp::CheckpointCallbackOptions options;
  options.require_resume = true;
  dcpp::CheckpointCallback checkpoints(
      std::make_shared<dcpp::CheckpointManager>(
          dcpp::CheckpointManagerOptions().with_root(dir / "typo")),
      options);
  REQUIRE_THROWS_WITH(checkpoints.on_train_begin(run.context),
                      Catch::Contains("no complete checkpoint under '" + (dir / "typo").string() +
                                      "' to resume from") &&
                          Catch::Contains("require_resume"));
  CHECK(run.context.step == 0);
}

TEST_CASE("resuming from a step that is not there lists the steps that are") {
  TempDir dir;
  dcpp::CheckpointManager manager(dcpp::CheckpointManagerOptions().with_root(dir.path()));
  dcpp::StateDict state = small_state(0);
  dcpp::RestoreRequest missing;
  missing.step = 4;
  REQUIRE_THROWS_WITH(
      manager.restore(state, missing),
      Catch::Contains("there is no complete checkpoint under '" + dir.path().string() + "'"));
  manager.save(small_state(3), request(3)).committed.wait();
  manager.save(small_state(6), request(6)).committed.wait();
  REQUIRE_THROWS_WITH(manager.restore(state, missing),
                      Catch::Contains(dcpp::step_directory_name(4) +
                                      "' on rank 0: it is not a complete checkpoint") &&
                          Catch::Contains("are of steps 3, 6"));
}

TEST_CASE("a managed save that fails half-way leaves no data file and no lock behind") {
  TempDir dir;
  dcpp::CheckpointManager manager(
      dcpp::CheckpointManagerOptions().with_root(dir.path()).with_async(false));
  dcpp::StateDict failing = small_state(3);
  failing.insert("bad", c10::IValue(c10::make_intrusive<c10::ivalue::Future>(c10::IntType::get())));
  REQUIRE_THROWS_AS(manager.save(failing, request(3)), dcpp::CheckpointError);
  std::vector<std::string> left;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir.path())) {
    const std::string name = entry.path().filename().string();
    if (entry.path().extension() == ".distcp" || name.rfind(".dcpp-save", 0) == 0) {
      left.push_back(entry.path().string());
    }
  }
  CHECK(left.empty());
  manager.save(small_state(3), request(3));
  REQUIRE(steps_of(manager.list()) == std::vector<int64_t>{3});
}
