// The options of saving and loading (SaveOptions, LoadOptions, AsyncCheckpointerOptions,
// CheckpointManagerOptions): each holds its process group and coordinator rank in one Ranks, set
// whole (with_ranks) or field by field (with_process_group, with_coordinator_rank), in one chain
// with the struct's other with_ setters. The other options structs chain theirs the same way.
// A program written against 0.1's API (`options.process_group`, `options.coordinator_rank`)
// still compiles and runs: those fields are [[deprecated]] aliases until 0.3.

#include "dcpp_test.h"
#include "rank_threads.h"

#include <dcpp/dcpp.h>
#include <dcpp/dist.h>
#include <dcpp/storage/s3_storage.h>

#include <torch/csrc/distributed/c10d/HashStore.hpp>

#include <cmath>
#include <csignal>
#include <thread>

namespace {

c10::intrusive_ptr<c10d::ProcessGroup> one_rank_group() {
  return dcpp::make_gloo_process_group(c10::make_intrusive<c10d::HashStore>(), 0, 1);
}

// `make` throws a CheckpointError of kind kUsage whose message holds `message`.
template <typename Make>
void require_usage_error(Make make, const std::string& message) {
  INFO(message);
  try {
    make();
    FAIL("no error");
  } catch (const dcpp::CheckpointError& e) {
    CHECK(e.kind() == dcpp::ErrorKind::kUsage);
    CHECK_THAT(e.what(), Catch::Contains(message));
  }
}

}  // namespace

TEST_CASE("Ranks defaults to this process alone, coordinated by rank 0") {
  const dcpp::Ranks ranks;
  CHECK(!ranks.process_group);
  CHECK(ranks.coordinator_rank == 0);
  CHECK(!dcpp::SaveOptions().ranks.process_group);
  CHECK(dcpp::LoadOptions().ranks.coordinator_rank == 0);
  CHECK(!dcpp::AsyncCheckpointerOptions().ranks.process_group);
  CHECK(dcpp::CheckpointManagerOptions().ranks.coordinator_rank == 0);
}

TEST_CASE("every options struct sets its Ranks whole or field by field") {
  const auto group = one_rank_group();
  const auto cache = std::make_shared<dcpp::SavePlanCache>();
  const dcpp::Ranks ranks = dcpp::Ranks().with_process_group(group).with_coordinator_rank(2);
  CHECK(ranks.process_group == group);
  CHECK(ranks.coordinator_rank == 2);

  const dcpp::SaveOptions save =
      dcpp::SaveOptions()
          .with_process_group(group)
          .with_coordinator_rank(2)
          .with_use_collectives(false)
          .with_rank(0)
          .with_plan_cache(cache)
          .with_file_system(dcpp::FileSystemWriterOptions().with_overwrite(true));
  CHECK(save.ranks.process_group == group);
  CHECK(save.ranks.coordinator_rank == 2);
  CHECK(!save.use_collectives);
  CHECK(save.ranks.rank == 0);
  CHECK(save.plan_cache == cache);
  CHECK(save.file_system.overwrite);

  const dcpp::LoadOptions load = dcpp::LoadOptions()
                                     .with_ranks(ranks)
                                     .with_allow_partial_load(true)
                                     .with_all_or_nothing(true)
                                     .with_read_once(dcpp::ReadOnce::kAlways);
  CHECK(load.ranks.process_group == group);
  CHECK(load.ranks.coordinator_rank == 2);
  CHECK(load.allow_partial_load);
  CHECK(load.all_or_nothing);
  CHECK(load.read_once == dcpp::ReadOnce::kAlways);
  CHECK(dcpp::LoadOptions().read_once == dcpp::ReadOnce::kAuto);

  const dcpp::AsyncCheckpointerOptions async =
      dcpp::AsyncCheckpointerOptions()
          .with_process_group(group)
          .with_coordinator_rank(2)
          .with_in_flight_policy(dcpp::InFlightPolicy::kFail)
          .with_plan_cache(cache)
          .with_uploader_nice(0);
  CHECK(async.ranks.process_group == group);
  CHECK(async.ranks.coordinator_rank == 2);
  CHECK(async.in_flight_policy == dcpp::InFlightPolicy::kFail);
  CHECK(async.uploader_nice == 0);
  CHECK(async.plan_cache == cache);

  const dcpp::CheckpointManagerOptions manager = dcpp::CheckpointManagerOptions()
                                                     .with_root("ckpt")
                                                     .with_ranks(ranks)
                                                     .with_async(false)
                                                     .with_plan_caching(false)
                                                     .with_read_once(dcpp::ReadOnce::kNever);
  CHECK(manager.ranks.process_group == group);
  CHECK(manager.ranks.coordinator_rank == 2);
  CHECK(!manager.async);
  CHECK(!manager.plan_caching);
  CHECK(dcpp::CheckpointManagerOptions().plan_caching);
  CHECK(manager.read_once == dcpp::ReadOnce::kNever);
  CHECK(dcpp::CheckpointManagerOptions().read_once == dcpp::ReadOnce::kAuto);
}

TEST_CASE("the stagers', the callback's and a restore's options chain their with_ setters") {
  const dcpp::TbbStagerOptions tbb = dcpp::TbbStagerOptions()
                                         .with_concurrency(3)
                                         .with_nice(0)
                                         .with_piece_bytes(1 << 20)
                                         .with_synchronize_after_execute(true);
  CHECK(tbb.concurrency == 3);
  CHECK(tbb.nice == 0);
  CHECK(tbb.piece_bytes == (1 << 20));
  CHECK(tbb.synchronize_after_execute);
  CHECK(dcpp::BlockingStagerOptions().with_piece_bytes(4096).piece_bytes == 4096);

  const dcpp::CheckpointCallbackOptions callback =
      dcpp::CheckpointCallbackOptions()
          .with_resume(dcpp::RestoreRequest()
                           .with_step(12)
                           .with_exclude_from_loading({"optim"})
                           .with_allow_partial_load(true)
                           .with_all_or_nothing(true))
          .with_resume_enabled(false)
          .with_require_resume(true)
          .with_preemption_signals({SIGUSR2})
          .with_max_consecutive_failed_saves(5)
          .with_agree_every_steps(4)
          .with_save_at_end(false)
          .with_export_at_end("model", at::kBFloat16);
  CHECK(callback.resume.step == 12);
  CHECK(callback.resume.path.empty());
  CHECK(callback.resume.exclude_from_loading == std::vector<std::string>{"optim"});
  CHECK(callback.resume.allow_partial_load);
  CHECK(callback.resume.all_or_nothing);
  CHECK(!callback.resume_enabled);
  CHECK(callback.require_resume);
  CHECK(callback.preemption_signals == std::vector<int>{SIGUSR2});
  CHECK(callback.max_consecutive_failed_saves == 5);
  CHECK(callback.agree_every_steps == 4);
  CHECK(!callback.save_at_end);
  CHECK(callback.export_at_end);
  CHECK(callback.export_key == "model");
  CHECK(callback.export_dtype == at::kBFloat16);
  CHECK(dcpp::RestoreRequest().with_path("ckpt/step-00000012").path == "ckpt/step-00000012");
}

TEST_CASE("a save and a load take their group through the with_ setters") {
  dcpp::test::TempDir dir;
  const auto group = one_rank_group();
  dcpp::StateDict state;
  state.insert("w", at::arange(4, at::kFloat));
  dcpp::save(state, dir / "ckpt", dcpp::SaveOptions().with_process_group(group));

  dcpp::StateDict target;
  target.insert("w", at::zeros({4}, at::kFloat));
  dcpp::load(target, dir / "ckpt", dcpp::LoadOptions().with_process_group(group));
  CHECK(at::equal(target.at("w").tensor(), at::arange(4, at::kFloat)));
}

TEST_CASE("a store for several ranks without this process's rank is refused, naming ranks.rank") {
  dcpp::test::TempDir dir;
  auto store = c10::make_intrusive<c10d::HashStore>();
  dcpp::CheckpointManagerOptions manager;
  manager.root = dir / "root";
  manager.ranks.store = store;
  manager.ranks.world_size = 2;
  REQUIRE_THROWS_WITH(dcpp::CheckpointManager(manager),
                      Catch::Contains("CheckpointManagerOptions: ranks.store is given for 2 ranks "
                                      "without this process's ranks.rank"));
  dcpp::AsyncCheckpointerOptions async;
  async.ranks.store = store;
  async.ranks.world_size = 3;
  REQUIRE_THROWS_WITH(dcpp::AsyncCheckpointer(async),
                      Catch::Contains("AsyncCheckpointerOptions: ranks.store is given for 3 ranks "
                                      "without this process's ranks.rank"));
}

TEST_CASE("the S3 options, a save request and the remote tier chain their with_ setters") {
  const dcpp::S3Options store = dcpp::S3Options().with_endpoint_url("http://127.0.0.1:9000");
  const dcpp::S3WriterOptions writer = dcpp::S3WriterOptions()
                                           .with_s3(store)
                                           .with_thread_count(3)
                                           .with_single_file_per_rank(false)
                                           .with_overwrite(true)
                                           .with_checksum_file(false)
                                           .with_compression(dcpp::Compression::kZstd, 7);
  CHECK(writer.s3.endpoint_url == "http://127.0.0.1:9000");
  CHECK(writer.thread_count == 3);
  CHECK(!writer.single_file_per_rank);
  CHECK(writer.overwrite);
  CHECK(!writer.checksum_file);
  CHECK(writer.compression == dcpp::Compression::kZstd);
  CHECK(writer.compression_level == 7);
  const dcpp::S3ReaderOptions reader = dcpp::S3ReaderOptions()
                                           .with_s3(store)
                                           .with_thread_count(2)
                                           .with_verify_checksums(false)
                                           .with_max_decompressed_value_size(1 << 20);
  CHECK(reader.s3.endpoint_url == "http://127.0.0.1:9000");
  CHECK(reader.thread_count == 2);
  CHECK(!reader.verify_checksums);
  CHECK(reader.max_decompressed_value_size == (1 << 20));
  CHECK(dcpp::SaveOptions().with_s3(store).s3.endpoint_url == store.endpoint_url);
  CHECK(dcpp::LoadOptions().with_s3(store).s3.endpoint_url == store.endpoint_url);
  CHECK(dcpp::AsyncCheckpointerOptions().with_s3(store).s3.endpoint_url == store.endpoint_url);
  CHECK(dcpp::RemoteTierOptions().with_drain_lease(std::chrono::seconds(5)).drain_lease ==
        std::chrono::seconds(5));

  const dcpp::SaveRequest request = dcpp::SaveRequest()
                                        .with_step(40)
                                        .with_epoch(2)
                                        .with_metrics({{"loss", 0.5}})
                                        .with_metric("accuracy", 0.75)
                                        .with_content({{"model", "gpt-small"}});
  CHECK(request.step == 40);
  CHECK(request.epoch == 2);
  CHECK(request.metrics == std::map<std::string, double>{{"accuracy", 0.75}, {"loss", 0.5}});
  CHECK(request.content == dcpp::ContentMetadata{{"model", "gpt-small"}});
}

TEST_CASE("a manager's option out of its range is refused before the root is touched, naming it") {
  dcpp::test::TempDir dir;
  const auto refused = [&](dcpp::CheckpointManagerOptions options, const std::string& message) {
    options.root = dir / "root";
    require_usage_error([&] { dcpp::CheckpointManager manager(options); }, message);
    CHECK(!std::filesystem::exists(dir / "root"));
  };
  dcpp::CheckpointManagerOptions options;
  refused(dcpp::CheckpointManagerOptions(options).with_save_every_steps(-5),
          "CheckpointManagerOptions::save_every_steps is -5: give the step period");
  refused(dcpp::CheckpointManagerOptions(options).with_save_every_seconds(-1),
          "CheckpointManagerOptions::save_every_seconds is -1");
  refused(dcpp::CheckpointManagerOptions(options).with_save_every_seconds(std::nan("")),
          "CheckpointManagerOptions::save_every_seconds is nan");
  refused(dcpp::CheckpointManagerOptions(options).with_retention(
              dcpp::RetentionPolicy().with_keep_latest(-1)),
          "CheckpointManagerOptions::retention.keep_latest is -1");
  refused(dcpp::CheckpointManagerOptions(options).with_retention(
              dcpp::RetentionPolicy().with_keep_every_steps(-100)),
          "CheckpointManagerOptions::retention.keep_every_steps is -100");
  refused(dcpp::CheckpointManagerOptions(options).with_retention(
              dcpp::RetentionPolicy().with_keep_best(2, "")),
          "CheckpointManagerOptions::retention.best_metric is empty");
  const dcpp::RemoteTierOptions remote = dcpp::RemoteTierOptions().with_url("s3://bucket/job");
  refused(dcpp::CheckpointManagerOptions(options).with_remote(
              dcpp::RemoteTierOptions(remote).with_retention(
                  dcpp::RetentionPolicy().with_keep_best(-3, "loss"))),
          "CheckpointManagerOptions::remote.retention.keep_best is -3");
  refused(dcpp::CheckpointManagerOptions(options).with_remote(
              dcpp::RemoteTierOptions(remote).with_files_at_once(0)),
          "CheckpointManagerOptions::remote.files_at_once is 0");
  refused(dcpp::CheckpointManagerOptions(options).with_remote(
              dcpp::RemoteTierOptions(remote).with_drain_lease(std::chrono::seconds(-1))),
          "CheckpointManagerOptions::remote.drain_lease is -1 s");

  // The remote tier's fields mean nothing, and are not checked, while it is off.
  dcpp::CheckpointManager unchecked(
      dcpp::CheckpointManagerOptions(options)
          .with_root(dir / "remote-off")
          .with_async(false)
          .with_remote(dcpp::RemoteTierOptions().with_files_at_once(0)));
  CHECK(std::filesystem::is_directory(dir / "remote-off"));
}

TEST_CASE("a callback's option out of its range is refused, naming it") {
  dcpp::test::TempDir dir;
  auto manager = std::make_shared<dcpp::CheckpointManager>(
      dcpp::CheckpointManagerOptions().with_root(dir / "root").with_async(false));
  const auto options = dcpp::CheckpointCallbackOptions().with_preemption_signals({});
  require_usage_error(
      [&] {
        dcpp::CheckpointCallback(
            manager, dcpp::CheckpointCallbackOptions(options).with_agree_every_steps(0));
      },
      "CheckpointCallbackOptions::agree_every_steps is 0: give how many steps");
  require_usage_error(
      [&] {
        dcpp::CheckpointCallback(
            manager,
            dcpp::CheckpointCallbackOptions(options).with_max_consecutive_failed_saves(-2));
      },
      "CheckpointCallbackOptions::max_consecutive_failed_saves is -2");
}

// From here to the end: a program written against dcpp 0.1's documented API, whose options held
// `process_group` and `coordinator_rank` themselves. Its user sees deprecation warnings; the
// pragma keeps them out of this build's output.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

TEST_CASE("0.1's options.process_group and options.coordinator_rank still work, deprecated") {
  dcpp::test::TempDir dir;
  const at::Tensor full = at::arange(12, at::kFloat).reshape({4, 3});
  // Two ranks save one tensor, each its half, through the old fields: only a save over the group
  // makes one checkpoint of the whole tensor (alone, each would commit its half as the whole).
  dcpp::test::on_ranks(2, "options-0.1", [&](int rank, auto group) {
    dcpp::StateDict state;
    state.insert("w",
                 dcpp::ShardedTensor({4, 3}, {{full.narrow(0, 2 * rank, 2).clone(), {2 * rank, 0}}},
                                     at::kFloat));
    dcpp::SaveOptions options;
    options.process_group = group;
    options.coordinator_rank = 1;
    dcpp::save(state, dir / "ckpt", options);

    dcpp::StateDict target;
    target.insert("w", at::zeros({4, 3}, at::kFloat));
    dcpp::LoadOptions load_options;
    load_options.process_group = group;
    load_options.coordinator_rank = 1;
    dcpp::load(target, dir / "ckpt", load_options);
    if (!at::equal(target.at("w").tensor(), full))
      throw std::runtime_error("rank loaded other values");
  });
  dcpp::StateDict whole;
  whole.insert("w", at::zeros({4, 3}, at::kFloat));
  dcpp::load(whole, dir / "ckpt");
  CHECK(at::equal(whole.at("w").tensor(), full));

  // The old coordinator_rank is read: rank 1 of a 1-rank group is refused, naming it.
  dcpp::SaveOptions one_rank;
  one_rank.process_group = one_rank_group();
  one_rank.coordinator_rank = 1;
  dcpp::StateDict state;
  state.insert("w", full);
  REQUIRE_THROWS_WITH(dcpp::save(state, dir / "other", one_rank),
                      Catch::Contains("coordinator rank 1 is not a rank of the 1-rank"));
}

TEST_CASE("an old field and its Ranks field set to different values fail, naming both") {
  dcpp::test::TempDir dir;
  dcpp::StateDict state;
  state.insert("w", at::arange(4, at::kFloat));
  dcpp::SaveOptions save;
  save.process_group = one_rank_group();
  save.ranks.process_group = one_rank_group();
  try {
    dcpp::save(state, dir / "ckpt", save);
    FAIL("saved");
  } catch (const dcpp::CheckpointError& error) {
    CHECK(error.kind() == dcpp::ErrorKind::kUsage);
    CHECK_THAT(error.what(), Catch::Contains("SaveOptions: process_group (deprecated) and "
                                             "ranks.process_group name different groups"));
  }
  dcpp::LoadOptions load;
  load.coordinator_rank = 2;
  load.ranks.coordinator_rank = 1;
  REQUIRE_THROWS_WITH(dcpp::load(state, dir / "ckpt", load),
                      Catch::Contains("LoadOptions: coordinator_rank (deprecated) is 2 and "
                                      "ranks.coordinator_rank 1"));
  dcpp::AsyncCheckpointerOptions async;
  async.coordinator_rank = 3;
  async.ranks.coordinator_rank = 1;
  REQUIRE_THROWS_WITH(dcpp::AsyncCheckpointer(async),
                      Catch::Contains("AsyncCheckpointerOptions: coordinator_rank"));
  dcpp::CheckpointManagerOptions manager;
  manager.root = dir / "root";
  manager.process_group = one_rank_group();
  manager.ranks.process_group = one_rank_group();
  REQUIRE_THROWS_WITH(dcpp::CheckpointManager(manager),
                      Catch::Contains("CheckpointManagerOptions: process_group (deprecated)"));
  // Set in one place only, or to the same value in both, they are taken.
  const auto group = one_rank_group();
  dcpp::SaveOptions both;
  both.process_group = group;
  both.ranks.process_group = group;
  CHECK_NOTHROW(dcpp::save(state, dir / "both", both));
}

TEST_CASE("0.1's store, rank and world_size fields still work, deprecated, and fold into ranks") {
  dcpp::test::TempDir dir;
  // A manager and a checkpointer of two ranks made from the store through the old fields: the
  // groups they make span both ranks, so each rank's half makes one tensor.
  const at::Tensor full = at::arange(8, at::kFloat).reshape({4, 2});
  auto store = c10::make_intrusive<c10d::HashStore>();
  std::vector<std::thread> ranks;
  std::vector<std::string> errors(2);
  for (int rank = 0; rank < 2; ++rank) {
    ranks.emplace_back([&, rank] {
      try {
        dcpp::StateDict state;
        state.insert(
            "w", dcpp::ShardedTensor({4, 2}, {{full.narrow(0, 2 * rank, 2).clone(), {2 * rank, 0}}},
                                     at::kFloat));
        dcpp::CheckpointManagerOptions options;
        options.root = dir / "root";
        options.async = true;
        options.store = store;
        options.rank = rank;
        options.world_size = 2;
        dcpp::CheckpointManager manager(options);
        dcpp::SaveRequest request;
        request.step = 1;
        manager.save(state, request).committed.wait();
        manager.wait();
        dcpp::AsyncCheckpointerOptions async;
        async.store = store;
        async.rank = rank;
        async.world_size = 2;
        async.group_options.group_name = "options-0.1-async";
        dcpp::AsyncCheckpointer checkpointer(async);
        checkpointer.async_save(state, dir / "async").committed.wait();
      } catch (const std::exception& error) {
        errors[rank] = error.what();
      }
    });
  }
  for (std::thread& rank : ranks) rank.join();
  CHECK(errors == std::vector<std::string>(2));
  for (const char* where : {"root/step-00000001", "async"}) {
    dcpp::StateDict whole;
    whole.insert("w", at::zeros({4, 2}, at::kFloat));
    dcpp::load(whole, dir / where);
    CHECK(at::equal(whole.at("w").tensor(), full));
  }

  // SaveOptions' old `rank` names a save without collectives' files.
  dcpp::SaveOptions alone;
  alone.use_collectives = false;
  alone.rank = 3;
  dcpp::StateDict state;
  state.insert("w", full);
  dcpp::save(state, dir / "alone", alone);
  CHECK(std::filesystem::exists(dir / "alone" / "__3.metadata"));

  // Set in both places to different values, they fail naming the field.
  dcpp::SaveOptions both;
  both.use_collectives = false;
  both.rank = 3;
  both.ranks.rank = 2;
  REQUIRE_THROWS_WITH(dcpp::save(state, dir / "both", both),
                      Catch::Contains("SaveOptions: rank (deprecated) and ranks.rank differ"));
  dcpp::AsyncCheckpointerOptions sizes;
  sizes.world_size = 3;
  sizes.ranks.world_size = 2;
  REQUIRE_THROWS_WITH(dcpp::AsyncCheckpointer(sizes),
                      Catch::Contains("AsyncCheckpointerOptions: world_size (deprecated) and "
                                      "ranks.world_size differ"));
}

#pragma GCC diagnostic pop
