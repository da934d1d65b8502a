// The CheckpointManager's remote tier against a real S3 server (s3rver behind the fault proxy,
// storage/s3_test_server.h): steps drained and verified, retention per tier, resume from either
// tier (local preferred; remote when the local disk is lost), a failed drain losing nothing.

#include "dcpp_test.h"
#include "manager_test_support.h"
#include "storage/s3_test_server.h"

#include <dcpp/checkpoint/megatron.h>
#include <dcpp/core/checkpoint_error.h>
#include <dcpp/plugin/checkpoint_manager.h>
#include <dcpp/storage/megatron_storage.h>
#include <dcpp/storage/s3_prefix.h>

#include <torch/csrc/distributed/c10d/HashStore.hpp>

#include <fstream>
#include <iterator>
#include <thread>

namespace fs = std::filesystem;
using dcpp::test::request;
using dcpp::test::S3Fault;
using dcpp::test::S3TestServer;
using dcpp::test::steps_of;
using dcpp::test::TempDir;

namespace {

dcpp::StateDict state_of_step(int64_t step) {
  dcpp::StateDict state;
  state.insert("model.weight", at::randn({64, 128}).add(static_cast<double>(step)));
  state.insert("model.big", at::randn({3, 1024, 1024}));  // 12 MiB: a multipart upload
  state.insert("step", step);
  return state;
}

dcpp::StateDict zeros_like(const dcpp::StateDict& state) {
  dcpp::StateDict zeros;
  zeros.insert("model.weight", at::zeros_like(state.at("model.weight").tensor()));
  zeros.insert("model.big", at::zeros_like(state.at("model.big").tensor()));
  zeros.insert("step", int64_t{-1});
  return zeros;
}

void require_equal(const dcpp::StateDict& actual, const dcpp::StateDict& expected) {
  for (const char* key : {"model.weight", "model.big"}) {
    INFO(key);
    REQUIRE(at::equal(actual.at(key).tensor(), expected.at(key).tensor()));
  }
  REQUIRE(actual.at("step").value().toInt() == expected.at("step").value().toInt());
}

std::string file_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// A local root and a bucket of its own, and managers over both.
struct Tiers {
  S3TestServer& server = S3TestServer::get();
  TempDir dir;
  fs::path root = dir / "checkpoints";
  std::string bucket = server.create_bucket("tiers");
  std::string url = "s3://" + bucket + "/run";

  Tiers() {
    server.clear_faults();
    server.reset_traffic();
  }
  ~Tiers() { server.clear_faults(); }

  dcpp::S3Options s3() const {
    dcpp::S3Options options = server.options();
    options.part_size = 5 << 20;
    return options;
  }
  dcpp::CheckpointManagerOptions options(int keep_local, int keep_remote) const {
    return dcpp::CheckpointManagerOptions()
        .with_root(root)
        .with_retention(dcpp::RetentionPolicy().with_keep_latest(keep_local))
        .with_remote(dcpp::RemoteTierOptions().with_url(url).with_s3(s3()).with_retention(
            dcpp::RetentionPolicy().with_keep_latest(keep_remote)));
  }
  // Every upload whose path holds `path_contains` fails, a hundred times over.
  void fail_uploads_of(const std::string& path_contains) const {
    S3Fault fault;
    fault.method = "PUT";
    fault.path_contains = path_contains;
    fault.status = 500;
    fault.times = 100;
    server.inject(fault);
  }
  // The names of the remote objects, past the proxy.
  std::vector<std::string> remote_objects(const std::string& name_prefix = {}) const {
    dcpp::S3Options direct = s3();
    direct.endpoint_url = server.direct_endpoint();
    dcpp::S3Prefix prefix(url, direct);
    std::vector<std::string> names;
    for (const dcpp::S3ObjectEntry& object : prefix.list(name_prefix)) names.push_back(object.name);
    return names;
  }
};

// The local root is lost: `manager` resumes step `step` from the remote tier, bit for bit
// `expected`.
void require_resume_from_remote(dcpp::CheckpointManager& manager, const Tiers& tiers, int64_t step,
                                const dcpp::StateDict& expected) {
  fs::remove_all(tiers.root);
  dcpp::StateDict state = zeros_like(expected);
  const std::optional<dcpp::CheckpointInfo> info =
      manager.restore(state, dcpp::RestoreRequest().with_step(step));
  REQUIRE(info);
  CHECK(info->path == tiers.url + "/" + dcpp::step_directory_name(step));
  require_equal(state, expected);
}

}  // namespace

TEST_CASE("committed steps drain to the remote tier, byte for byte, each tier keeping its own") {
  Tiers tiers;
  std::map<int64_t, dcpp::StateDict> saved;
  {
    dcpp::CheckpointManager manager(tiers.options(2, 3));
    for (int64_t step = 1; step <= 5; ++step) {
      saved[step] = state_of_step(step);
      manager.save(saved[step], request(step));
    }
    manager.wait();
    manager.wait_for_remote();
    CHECK(steps_of(manager.list()) == std::vector<int64_t>{4, 5});
    CHECK(steps_of(manager.list_remote()) == std::vector<int64_t>{3, 4, 5});
    CHECK(manager.list_remote().back().path == tiers.url + "/step-00000005");
    REQUIRE(manager.latest());
    CHECK(manager.latest()->path == tiers.root / "step-00000005");  // local preferred
  }
  CHECK(tiers.remote_objects("step-00000001/").empty());
  CHECK(tiers.remote_objects("step-00000002/").empty());

  // Every file of the local step is a remote object with the same bytes.
  dcpp::S3Prefix remote(tiers.url, tiers.s3());
  const fs::path local = tiers.root / "step-00000005";
  int files = 0;
  for (const auto& entry : fs::directory_iterator(local)) {
    const std::string name = "step-00000005/" + entry.path().filename().string();
    INFO(name);
    const std::optional<std::string> object = remote.read(name);
    REQUIRE(object);
    CHECK(*object == file_bytes(entry.path()));
    ++files;
  }
  CHECK(files >= 3);  // .metadata, the manifest, data
  CHECK(tiers.remote_objects("step-00000005/").size() == static_cast<size_t>(files));
}

TEST_CASE("Megatron-LM's step names drain as iter_NNNNNNN, metadata.json after .metadata") {
  Tiers tiers;
  const auto megatron_state = [](int64_t step) {
    dcpp::StateDict state = state_of_step(step);
    state.erase("step");  // a plain value: Megatron's go into its common state
    dcpp::StateDict common;
    common.insert("iteration", step);
    dcpp::megatron::add_common_state(state, std::move(common));
    return state;
  };
  std::map<int64_t, dcpp::StateDict> saved;
  const auto options = tiers.options(1, 3).with_step_names(dcpp::StepNames::kMegatronLM);
  // A step Megatron-LM saved itself, without a manifest of dcpp's, drains too: complete remotely.
  fs::create_directories(tiers.root);
  fs::copy(dcpp::test::megatron_fixture("mcore_tp2"), tiers.root / "iter_0000000");
  {
    dcpp::CheckpointManager manager(options);
    manager.wait_for_remote();
    CHECK(steps_of(manager.list_remote()) == std::vector<int64_t>{0});
    for (int64_t step = 1; step <= 2; ++step) {
      saved[step] = megatron_state(step);
      manager.save(saved[step], request(step));
    }
    manager.wait_for_remote();
    CHECK(steps_of(manager.list_remote()) == std::vector<int64_t>{0, 1, 2});
    CHECK(manager.list_remote().back().path == tiers.url + "/iter_0000002");

    // Megatron's commit fails to upload: the step's .metadata is there, the step is not complete.
    tiers.fail_uploads_of("iter_0000003/metadata.json");
    saved[3] = megatron_state(3);
    manager.save(saved[3], request(3));
    CHECK_THROWS_WITH(manager.wait_for_remote(), Catch::Contains("iter_0000003/metadata.json"));
    const std::vector<std::string> partial = tiers.remote_objects("iter_0000003/");
    CHECK(std::count(partial.begin(), partial.end(), "iter_0000003/.metadata") == 1);
    CHECK(std::count(partial.begin(), partial.end(), "iter_0000003/metadata.json") == 0);
    // (Step 0 is gone: the remote keeps the newest 3 of the timeline, step 3 counted.)
    CHECK(steps_of(manager.list_remote()) == std::vector<int64_t>{1, 2});
    tiers.server.clear_faults();
    manager.wait_for_remote();
    CHECK(steps_of(manager.list_remote()) == std::vector<int64_t>{1, 2, 3});
  }
  // Every file of the local step, metadata.json included, is a remote object with its bytes.
  dcpp::S3Prefix remote(tiers.url, tiers.s3());
  for (const auto& entry : fs::directory_iterator(tiers.root / "iter_0000003")) {
    const std::string name = "iter_0000003/" + entry.path().filename().string();
    INFO(name);
    const std::optional<std::string> object = remote.read(name);
    REQUIRE(object);
    CHECK(*object == file_bytes(entry.path()));
  }
  CHECK(remote.read(std::string("iter_0000003/") + dcpp::kMegatronConfigFile));

  // The local disk is lost: the job resumes from the store's Megatron step, bit for bit.
  fs::remove_all(tiers.root);
  dcpp::CheckpointManager resumed(options);
  dcpp::StateDict state;
  for (const char* key : {"model.weight", "model.big"}) {
    state.insert(key, at::zeros_like(saved[3].at(key).tensor()));
  }
  const std::optional<dcpp::CheckpointInfo> info = resumed.restore(state);
  REQUIRE(info);
  CHECK(info->path == tiers.url + "/iter_0000003");
  for (const char* key : {"model.weight", "model.big"}) {
    INFO(key);
    CHECK(dcpp::test::bitwise_equal(state.at(key).tensor(), saved[3].at(key).tensor()));
  }
}

TEST_CASE("a job that lost its local disk resumes from the remote tier, bit for bit") {
  Tiers tiers;
  const dcpp::StateDict saved = state_of_step(7);
  {
    dcpp::CheckpointManager manager(tiers.options(1, 2).with_async(false));
    manager.save(state_of_step(6), request(6));
    manager.save(saved, request(7));
    manager.wait_for_remote();
  }
  fs::remove_all(tiers.root);

  dcpp::CheckpointManager resumed(tiers.options(1, 2));
  CHECK(resumed.list().empty());
  dcpp::StateDict state = zeros_like(saved);
  const std::optional<dcpp::CheckpointInfo> info = resumed.restore(state);
  REQUIRE(info);
  CHECK(info->step == 7);
  CHECK(info->path == tiers.url + "/step-00000007");
  require_equal(state, saved);

  // An older step by number comes from the remote too.
  dcpp::StateDict older = zeros_like(saved);
  REQUIRE(resumed.restore(older, dcpp::RestoreRequest().with_step(6)));
  CHECK(older.at("step").value().toInt() == 6);
}

TEST_CASE("two ranks whose root was lost resume from the remote tier, the coordinator choosing") {
  Tiers tiers;
  const dcpp::StateDict saved = state_of_step(9);
  auto run_ranks = [](const std::function<void(int, c10::intrusive_ptr<c10d::Store>)>& body) {
    auto store = c10::make_intrusive<c10d::HashStore>();
    std::vector<std::string> errors(2);
    std::vector<std::thread> ranks;
    for (int rank = 0; rank < 2; ++rank) {
      ranks.emplace_back([&, rank] {
        try {
          body(rank, store);
        } catch (const std::exception& e) {
          errors[rank] = e.what();
        }
      });
    }
    for (auto& r : ranks) r.join();
    CHECK(errors == std::vector<std::string>(2));
  };
  run_ranks([&](int rank, c10::intrusive_ptr<c10d::Store> store) {
    dcpp::CheckpointManager manager(
        tiers.options(1, 1).with_async(false).with_store(store, rank, 2));
    manager.save(saved, request(9));
    manager.wait_for_remote();
  });
  fs::remove_all(tiers.root);
  std::vector<dcpp::StateDict> loaded{zeros_like(saved), zeros_like(saved)};
  std::vector<std::string> paths(2);
  run_ranks([&](int rank, c10::intrusive_ptr<c10d::Store> store) {
    dcpp::CheckpointManager manager(
        tiers.options(1, 1).with_async(false).with_store(store, rank, 2));
    const std::optional<dcpp::CheckpointInfo> info = manager.restore(loaded[rank]);
    if (info) paths[rank] = info->path.string();
  });
  for (int rank = 0; rank < 2; ++rank) {
    INFO("rank " << rank);
    CHECK(paths[rank] == tiers.url + "/step-00000009");
    require_equal(loaded[rank], saved);
  }
}

TEST_CASE("resume takes the newest step of either tier, the local copy when both hold it") {
  Tiers tiers;
  dcpp::CheckpointManager manager(tiers.options(0, 0).with_async(false));
  manager.save(state_of_step(1), request(1));
  const dcpp::StateDict second = state_of_step(2);
  manager.save(second, request(2));
  manager.wait_for_remote();
  REQUIRE(steps_of(manager.list_remote()) == std::vector<int64_t>{1, 2});

  dcpp::StateDict state = zeros_like(second);
  std::optional<dcpp::CheckpointInfo> info = manager.restore(state);
  REQUIRE(info);
  CHECK(info->path == tiers.root / "step-00000002");

  tiers.server.reset_traffic();
  fs::remove_all(tiers.root / "step-00000002");  // the local copy of the newest step is gone
  state = zeros_like(second);
  info = manager.restore(state);
  REQUIRE(info);
  CHECK(info->step == 2);
  CHECK(info->path == tiers.url + "/step-00000002");
  require_equal(state, second);
  CHECK(tiers.server.traffic().ranged_gets > 0);  // read from the store
}

TEST_CASE("a drain that fails loses nothing: the step stays local and the next drain copies it") {
  Tiers tiers;
  dcpp::CheckpointManager manager(tiers.options(1, 0));
  // Every try of the first data object's upload fails: the step's drain fails.
  tiers.fail_uploads_of("step-00000001/__0_0.distcp");
  manager.save(state_of_step(1), request(1));
  manager.wait();
  try {
    manager.wait_for_remote();
    FAIL("the drain's failure was not reported");
  } catch (const dcpp::CheckpointError& error) {
    CHECK(error.kind() == dcpp::ErrorKind::kIo);
    CHECK_THAT(std::string(error.what()), Catch::Contains("step-00000001/__0_0.distcp"));
  }
  CHECK(manager.list_remote().empty());  // no .metadata: not a remote checkpoint
  CHECK(steps_of(manager.list()) == std::vector<int64_t>{1});  // kept: not on the remote yet

  tiers.server.clear_faults();
  const dcpp::StateDict second = state_of_step(2);
  manager.save(second, request(2));
  manager.wait_for_remote();
  CHECK(steps_of(manager.list_remote()) == std::vector<int64_t>{1, 2});
  CHECK(steps_of(manager.list()) == std::vector<int64_t>{2});
}

TEST_CASE("a manager given a remote tier drains the steps already committed under its root") {
  Tiers tiers;
  {
    dcpp::CheckpointManager local_only(dcpp::CheckpointManagerOptions().with_root(tiers.root));
    local_only.save(state_of_step(3), request(3));
    local_only.save(state_of_step(4), request(4));
  }
  // What a drain killed midway left: objects of step 3 without its .metadata.
  dcpp::S3Prefix(tiers.url, tiers.s3()).write("step-00000003/__9_9.distcp", "partial");

  dcpp::CheckpointManager manager(tiers.options(0, 0));
  manager.wait_for_remote();
  CHECK(steps_of(manager.list_remote()) == std::vector<int64_t>{3, 4});
  const std::vector<std::string> step3 = tiers.remote_objects("step-00000003/");
  CHECK(std::find(step3.begin(), step3.end(), "step-00000003/__9_9.distcp") == step3.end());
}

TEST_CASE("a remote tier in a bucket that does not exist fails the manager, naming the bucket") {
  Tiers tiers;
  dcpp::CheckpointManagerOptions options = tiers.options(0, 0);
  options.remote.url = "s3://no-such-bucket-dcpp/run";
  try {
    dcpp::CheckpointManager manager(options);
    FAIL("a manager was made over a missing bucket");
  } catch (const dcpp::CheckpointError& error) {
    CHECK_THAT(std::string(error.what()), Catch::Contains("no-such-bucket-dcpp"));
    CHECK_THAT(std::string(error.what()), Catch::Contains("CheckpointManagerOptions::remote"));
  }
}

TEST_CASE("a remote step lacking a file its .metadata names is not complete, and is copied again") {
  Tiers tiers;
  dcpp::CheckpointManager manager(tiers.options(0, 0).with_async(false));
  manager.save(state_of_step(1), request(1));
  const dcpp::StateDict second = state_of_step(2);
  manager.save(second, request(2));
  manager.wait_for_remote();
  REQUIRE(steps_of(manager.list_remote()) == std::vector<int64_t>{1, 2});

  // Past the proxy: step 2 loses a data object, step 1's is cut short.
  dcpp::S3Options direct = tiers.s3();
  direct.endpoint_url = tiers.server.direct_endpoint();
  dcpp::S3Prefix store(tiers.url, direct);
  store.remove("step-00000002/__0_0.distcp");
  const std::optional<std::string> first = store.read("step-00000001/__0_0.distcp");
  REQUIRE(first);
  store.write("step-00000001/__0_0.distcp", first->substr(0, first->size() / 2));
  CHECK(manager.list_remote().empty());
  {
    TempDir elsewhere;  // a job on another disk sees no complete remote step to resume from
    dcpp::CheckpointManager other(
        tiers.options(0, 0).with_async(false).with_root(elsewhere / "checkpoints"));
    CHECK_FALSE(other.latest());
  }

  // The next pass copies both again: the local root still holds them.
  manager.save(state_of_step(3), request(3));
  manager.wait_for_remote();
  CHECK(steps_of(manager.list_remote()) == std::vector<int64_t>{1, 2, 3});
  require_resume_from_remote(manager, tiers, 2, second);
}

TEST_CASE("a store that is down stops neither a manager nor a restore from its root") {
  Tiers tiers;
  const dcpp::StateDict second = state_of_step(2);
  {
    dcpp::CheckpointManager manager(tiers.options(0, 0).with_async(false));
    manager.save(state_of_step(1), request(1));
    manager.save(second, request(2));
    manager.wait_for_remote();
  }
  S3Fault down;
  down.status = 500;
  down.times = 1000000;
  tiers.server.inject(down);

  dcpp::CheckpointManager manager(tiers.options(0, 0).with_async(false));  // a warning, no throw
  dcpp::StateDict state = zeros_like(second);
  const std::optional<dcpp::CheckpointInfo> info = manager.restore(state);
  REQUIRE(info);
  CHECK(info->path == tiers.root / "step-00000002");
  require_equal(state, second);
  REQUIRE(manager.latest());
  CHECK(manager.latest()->step == 2);
  // Saves commit locally; the drain fails, is reported, and loses nothing.
  manager.save(state_of_step(3), request(3));
  CHECK_THROWS_AS(manager.wait_for_remote(), dcpp::CheckpointError);
  CHECK(steps_of(manager.list()) == std::vector<int64_t>{1, 2, 3});
  {
    // A root without a checkpoint cannot tell whether to resume from the store: kIo, no guess.
    TempDir empty;
    dcpp::CheckpointManager fresh(
        tiers.options(0, 0).with_async(false).with_root(empty / "checkpoints"));
    dcpp::StateDict nothing = zeros_like(second);
    try {
      fresh.restore(nothing);
      FAIL("a restore guessed while the store was down");
    } catch (const dcpp::CheckpointError& error) {
      CHECK(error.kind() == dcpp::ErrorKind::kIo);
      CHECK_THAT(std::string(error.what()), Catch::Contains("cannot be read"));
    }
  }
  tiers.server.clear_faults();
  manager.save(state_of_step(4), request(4));
  manager.wait_for_remote();
  CHECK(steps_of(manager.list_remote()) == std::vector<int64_t>{1, 2, 3, 4});
}

TEST_CASE("a step whose copy keeps failing does not hold back the newer steps") {
  Tiers tiers;
  dcpp::CheckpointManager manager(tiers.options(0, 0).with_async(false));
  S3Fault fault;
  fault.method = "PUT";
  fault.path_contains = "step-00000001/";
  fault.status = 500;
  fault.times = 1000000;
  tiers.server.inject(fault);
  manager.save(state_of_step(1), request(1));
  const dcpp::StateDict second = state_of_step(2);
  manager.save(second, request(2));
  manager.save(state_of_step(3), request(3));
  // Step 1 failed and waits for its backoff; steps 2 and 3 went up meanwhile.
  CHECK_THROWS_AS(manager.wait_for_remote(), dcpp::CheckpointError);
  CHECK(steps_of(manager.list_remote()) == std::vector<int64_t>{2, 3});
  CHECK(steps_of(manager.list()) == std::vector<int64_t>{1, 2, 3});

  tiers.server.clear_faults();
  manager.wait_for_remote();  // tries step 1 at once
  CHECK(steps_of(manager.list_remote()) == std::vector<int64_t>{1, 2, 3});
  require_resume_from_remote(manager, tiers, 2, second);
}

TEST_CASE("what a copy or a deletion cut short left remotely is deleted by the next pass") {
  Tiers tiers;
  dcpp::S3Prefix store(tiers.url, tiers.s3());
  // A deletion cut short after `.metadata`, and a copy cut short before it, of steps the root
  // does not hold.
  store.write("step-00000007/dcpp_checkpoint.json", "{}");
  store.write("step-00000007/__0_0.distcp", "data");
  store.write("step-00000008/__0_0.distcp", "data");
  dcpp::CheckpointManager manager(tiers.options(0, 0).with_async(false));
  manager.save(state_of_step(9), request(9));
  manager.wait_for_remote();
  CHECK(tiers.remote_objects("step-00000007/").empty());
  CHECK(tiers.remote_objects("step-00000008/").empty());
  CHECK(steps_of(manager.list_remote()) == std::vector<int64_t>{9});
}

TEST_CASE("two jobs cannot drain one prefix at once; an expired lease is taken over") {
  Tiers tiers;
  TempDir other_dir;
  dcpp::CheckpointManagerOptions second_job =
      tiers.options(0, 0).with_async(false).with_root(other_dir / "checkpoints");
  std::optional<dcpp::CheckpointManager> second;
  {
    dcpp::CheckpointManager first(tiers.options(0, 0).with_async(false));
    first.save(state_of_step(1), request(1));
    first.wait_for_remote();  // holds the prefix's drain lease
    second.emplace(second_job);
    second->save(state_of_step(2), request(2));
    try {
      second->wait_for_remote();
      FAIL("a second job drained a prefix the first holds");
    } catch (const dcpp::CheckpointError& error) {
      CHECK(error.kind() == dcpp::ErrorKind::kUsage);
      CHECK_THAT(std::string(error.what()), Catch::Contains("drained by another job"));
    }
    CHECK(steps_of(second->list_remote()) == std::vector<int64_t>{1});
  }  // the first job ends: its lease with it
  second->wait_for_remote();
  CHECK(steps_of(second->list_remote()) == std::vector<int64_t>{1, 2});
  second.reset();

  // A lease whose holder died without releasing it is taken over once it expired.
  dcpp::S3Prefix(tiers.url, tiers.s3())
      .write(".dcpp-drain-lease",
             R"({"owner": "a-dead-job", "host": "elsewhere", "pid": 1, "expires_at": 1.0})");
  dcpp::CheckpointManager third(second_job);
  third.save(state_of_step(3), request(3));
  third.wait_for_remote();
  CHECK(steps_of(third.list_remote()) == std::vector<int64_t>{1, 2, 3});
}

TEST_CASE("the multipart uploads a killed drain left are aborted by the next pass") {
  Tiers tiers;
  tiers.server.begin_upload(tiers.bucket, "run/step-00000004/__0_0.distcp");
  tiers.server.begin_upload(tiers.bucket, "run/step-00000005/__1_0.distcp");
  tiers.server.begin_upload(tiers.bucket, "elsewhere/not-a-step");  // not the tier's: kept
  REQUIRE(tiers.server.uploads_in_progress(tiers.bucket) == 3);
  dcpp::CheckpointManager manager(tiers.options(0, 0).with_async(false));
  manager.save(state_of_step(6), request(6));
  manager.wait_for_remote();
  CHECK(tiers.server.uploads_in_progress(tiers.bucket) == 1);
  CHECK(steps_of(manager.list_remote()) == std::vector<int64_t>{6});
}

TEST_CASE("past listing_objects, a listing costs two small requests per complete step") {
  Tiers tiers;
  dcpp::CheckpointManagerOptions options = tiers.options(1, 10);
  options.remote.listing_objects = 0;  // the per-directory listing from the second pass on
  dcpp::CheckpointManager manager(options);
  for (int64_t step = 1; step <= 3; ++step) manager.save(state_of_step(step), request(step));
  manager.wait_for_remote();
  CHECK(steps_of(manager.list_remote()) == std::vector<int64_t>{1, 2, 3});
  // Every step known complete: the directories, then each step's commit objects.
  tiers.server.reset_traffic();
  CHECK(steps_of(manager.list_remote()) == std::vector<int64_t>{1, 2, 3});
  CHECK(tiers.server.traffic().requests == 1 + 2 * 3);
  CHECK(tiers.server.traffic().gets_by_name.count("dcpp_checkpoint.json") == 0);  // cached
  // A directory a copy cut short (no .metadata) is listed whole, and is not complete.
  dcpp::S3Prefix prefix(tiers.url, tiers.s3());
  prefix.write("step-00000004/__0_0.distcp", "partial");
  CHECK(steps_of(manager.list_remote()) == std::vector<int64_t>{1, 2, 3});
  // A new step is found and checked whole once, then known.
  const dcpp::StateDict fifth = state_of_step(5);
  manager.save(fifth, request(5));
  manager.wait_for_remote();  // its pass also deletes what step 4's copy left
  CHECK(tiers.remote_objects("step-00000004/").empty());
  tiers.server.reset_traffic();
  CHECK(steps_of(manager.list_remote()) == std::vector<int64_t>{1, 2, 3, 5});
  CHECK(tiers.server.traffic().requests == 1 + 2 * 4);
  // Restored from the store, bit for bit, through the per-directory listing.
  require_resume_from_remote(manager, tiers, 5, fifth);
}
