// What one rank meets while setting up S3 reaches every rank within the step that settles it: a
// rank without credentials fails a save, a load, an async save and a manager with a remote tier on
// every rank, naming itself; a manifest GET that fails on the coordinator fails every rank's
// restore. Before, the failing rank threw alone and the others waited in the next collective until
// the group's timeout. The groups here time out after 30 s, so a regression fails, not hangs.

#include "dcpp_test.h"
#include "manager_test_support.h"
#include "rank_threads.h"
#include "storage/s3_test_server.h"

#include <dcpp/async/async_checkpointer.h>
#include <dcpp/checkpoint/checkpointer.h>
#include <dcpp/core/checkpoint_error.h>
#include <dcpp/plugin/checkpoint_manager.h>

#include <chrono>
#include <string>
#include <vector>

using dcpp::test::on_rank_threads;
using dcpp::test::request;
using dcpp::test::S3Fault;
using dcpp::test::S3TestServer;
using dcpp::test::TempDir;

namespace {

constexpr int kRanks = 2;
constexpr int kWithoutCredentials = 1;

// The rank's group over `store`: loopback, timing out after 30 s.
c10::intrusive_ptr<c10d::ProcessGroup> setup_test_group(
    const c10::intrusive_ptr<c10d::Store>& store, int rank, const std::string& name) {
  return dcpp::make_gloo_process_group(store, rank, kRanks,
                                       dcpp::ProcessGroupOptions()
                                           .with_group_name(name)
                                           .with_gloo_hostname("127.0.0.1")
                                           .with_timeout(std::chrono::seconds(30)));
}

// The test server's options; on kWithoutCredentials, a profile no credentials file has and no
// keys, so resolving them fails ("the S3 profile ... is in neither ...").
dcpp::S3Options setup_test_s3(int rank) {
  dcpp::S3Options options = S3TestServer::get().options();
  if (rank == kWithoutCredentials) {
    options.access_key_id.clear();
    options.secret_access_key.clear();
    options.profile = "dcpp-test-profile-that-no-credentials-file-has";
  }
  return options;
}

dcpp::StateDict setup_test_state(double value) {
  dcpp::StateDict state;
  state.insert("w", at::full({4, 8}, value));
  return state;
}

// Each rank's error message ("" where a rank succeeded).
using Errors = std::vector<std::string>;

template <typename Body>
Errors setup_errors_on_ranks(Body body) {
  Errors errors(kRanks);
  on_rank_threads(kRanks, [&](int rank, const c10::intrusive_ptr<c10d::Store>& store) {
    try {
      body(rank, store);
    } catch (const dcpp::CheckpointError& e) {
      errors[rank] = e.what();
    }
  });
  return errors;
}

// Every rank failed with an error that names `rank` and contains `cause`, and none timed out.
void require_setup_errors_name(const Errors& errors, int rank, const std::string& cause) {
  for (int r = 0; r < kRanks; ++r) {
    INFO("rank " << r << ": " << errors[r]);
    CHECK_THAT(errors[r], Catch::Matchers::Contains("rank " + std::to_string(rank)));
    CHECK_THAT(errors[r], Catch::Matchers::Contains(cause));
    CHECK_THAT(errors[r], !Catch::Matchers::Contains("Timed out"));
  }
}

}  // namespace

TEST_CASE("a rank without S3 credentials fails a save to s3:// on every rank, naming itself") {
  const std::string url = "s3://" + S3TestServer::get().create_bucket("setup-save") + "/ckpt";
  const Errors errors =
      setup_errors_on_ranks([&](int rank, const c10::intrusive_ptr<c10d::Store>& store) {
        dcpp::SaveOptions options;
        options.ranks.process_group = setup_test_group(store, rank, "save");
        options.s3 = setup_test_s3(rank);
        dcpp::save(setup_test_state(rank), url, options);
      });
  require_setup_errors_name(errors, kWithoutCredentials, "is in neither");
}

TEST_CASE("a rank without S3 credentials fails a load from s3:// on every rank, naming itself") {
  const std::string url = "s3://" + S3TestServer::get().create_bucket("setup-load") + "/ckpt";
  dcpp::SaveOptions saving;
  saving.s3 = S3TestServer::get().options();
  dcpp::save(setup_test_state(3), url, saving);

  const Errors errors =
      setup_errors_on_ranks([&](int rank, const c10::intrusive_ptr<c10d::Store>& store) {
        dcpp::LoadOptions options;
        options.ranks.process_group = setup_test_group(store, rank, "load");
        options.s3 = setup_test_s3(rank);
        dcpp::StateDict state = setup_test_state(0);
        dcpp::load(state, url, options);
      });
  require_setup_errors_name(errors, kWithoutCredentials, "is in neither");
}

TEST_CASE("a rank without S3 credentials fails an async save on every rank, naming itself") {
  const std::string url = "s3://" + S3TestServer::get().create_bucket("setup-async") + "/ckpt";
  const Errors errors =
      setup_errors_on_ranks([&](int rank, const c10::intrusive_ptr<c10d::Store>& store) {
        dcpp::AsyncCheckpointerOptions options;
        options.ranks.process_group = setup_test_group(store, rank, "async");
        options.s3 = setup_test_s3(rank);
        dcpp::AsyncCheckpointer checkpointer(options);
        dcpp::AsyncSaveResponse response = checkpointer.async_save(setup_test_state(rank), url);
        response.committed.get();
      });
  require_setup_errors_name(errors, kWithoutCredentials, "is in neither");
}

TEST_CASE("a rank without S3 credentials fails a manager's remote tier on every rank") {
  TempDir dir;
  const std::string url = "s3://" + S3TestServer::get().create_bucket("setup-tier") + "/run";
  const Errors errors =
      setup_errors_on_ranks([&](int rank, const c10::intrusive_ptr<c10d::Store>& store) {
        dcpp::CheckpointManagerOptions options;
        options.root = dir / "checkpoints";
        options.async = false;
        options.ranks.process_group = setup_test_group(store, rank, "manager");
        options.remote = dcpp::RemoteTierOptions().with_url(url).with_s3(setup_test_s3(rank));
        dcpp::CheckpointManager manager(options);
      });
  require_setup_errors_name(errors, kWithoutCredentials, "is in neither");
}

TEST_CASE("a remote manifest the coordinator cannot read fails every rank's restore") {
  S3TestServer& server = S3TestServer::get();
  TempDir dir;
  const std::string url = "s3://" + server.create_bucket("setup-restore") + "/run";
  const dcpp::RemoteTierOptions remote =
      dcpp::RemoteTierOptions().with_url(url).with_s3(server.options());
  {
    dcpp::CheckpointManager manager(
        dcpp::CheckpointManagerOptions().with_root(dir / "a").with_async(false).with_remote(
            remote));
    dcpp::StateDict state = setup_test_state(5);
    manager.save(state, request(5));
    manager.wait_for_remote();
  }
  server.clear_faults();
  const Errors errors =
      setup_errors_on_ranks([&](int rank, const c10::intrusive_ptr<c10d::Store>& store) {
        dcpp::CheckpointManagerOptions options;
        options.root = dir / "b";
        options.async = false;
        options.ranks.process_group = setup_test_group(store, rank, "restore");
        options.remote = remote;
        dcpp::CheckpointManager manager(options);
        manager.wait_for_remote();  // the first drain pass lists the store, manifests included
        // One refusal, not retried: before, one rank met it and threw alone, the other went on
        // into the load and waited for it.
        options.ranks.process_group->barrier()->wait();
        if (rank == 0)
          server.inject(S3Fault{"GET", "dcpp_checkpoint.json", 1, 403, "AccessDenied"});
        options.ranks.process_group->barrier()->wait();
        dcpp::StateDict state = setup_test_state(0);
        manager.restore(state, dcpp::RestoreRequest().with_path(url + "/step-00000005"));
      });
  server.clear_faults();
  require_setup_errors_name(errors, 0, "dcpp_checkpoint.json");
}
