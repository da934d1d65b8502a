// The options of saving and loading (SaveOptions, LoadOptions, AsyncCheckpointerOptions,
// CheckpointManagerOptions): each holds its process group and coordinator rank in one Ranks, set
// whole (with_ranks) or field by field (with_process_group, with_coordinator_rank), in one chain
// with the struct's other with_ setters. The other options structs chain theirs the same way.

#include "dcpp_test.h"

#include <dcpp/dcpp.h>
#include <dcpp/dist.h>

#include <torch/csrc/distributed/c10d/HashStore.hpp>

#include <csignal>

namespace {

c10::intrusive_ptr<c10d::ProcessGroup> one_rank_group() {
  return dcpp::make_gloo_process_group(c10::make_intrusive<c10d::HashStore>(), 0, 1);
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
  CHECK(save.rank == 0);
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
