// Node-local roots (CheckpointManagerOptions::node_local_root): each host's disk holds only its
// ranks' files. Here a host's disk is a directory of its own per group of rank threads (ranks 0
// and 1 share one, rank 2 has another), the store is the real S3 server. Each host's leader
// drains its own files, the coordinator commits each remote step once every file is up, and a
// job on other disks and another number of ranks resumes from the store. (Two real hosts, mount
// namespaces with a disk each: node_local_hosts_test.cpp.)

#include "dcpp_test.h"
#include "manager_test_support.h"
#include "node_local_state.h"
#include "rank_threads.h"
#include "storage/s3_test_server.h"

#include <dcpp/checkpoint/checkpointer.h>
#include <dcpp/core/checkpoint_error.h>
#include <dcpp/plugin/checkpoint_manager.h>
#include <dcpp/storage/s3_prefix.h>

#include <ATen/ATen.h>

#include <string>
#include <vector>

namespace fs = std::filesystem;
using dcpp::test::node_local_state;
using dcpp::test::node_local_state_equals;
using dcpp::test::node_local_weights;
using dcpp::test::on_rank_threads;
using dcpp::test::S3TestServer;
using dcpp::test::TempDir;

namespace {

dcpp::CheckpointManagerOptions node_local_options(const fs::path& root, const std::string& url,
                                                  const c10::intrusive_ptr<c10d::Store>& store,
                                                  int rank, int world) {
  dcpp::CheckpointManagerOptions options;
  options.root = root;
  options.node_local_root = true;
  options.remote.url = url;
  options.remote.s3 = S3TestServer::get().options();
  options.ranks.with_store(store, rank, world);
  return options;
}

// The names of the files under `directory`, relative to it.
std::vector<std::string> node_local_files(const fs::path& directory) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(directory)) {
    names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::string node_local_joined(const std::vector<std::string>& names) {
  std::string text;
  for (const std::string& name : names) text += (text.empty() ? "" : " ") + name;
  return text;
}

// The store answers 500 to every upload whose path contains `part`, until the faults are cleared.
void refuse_uploads_to(const std::string& part) {
  dcpp::test::S3Fault refuse;
  refuse.method = "PUT";
  refuse.path_contains = part;
  refuse.status = 500;
  refuse.times = 1000;
  S3TestServer::get().inject(refuse);
}

}  // namespace

TEST_CASE("node-local roots: each host drains its files, a job on other disks resumes") {
  TempDir dir;
  const std::string url = "s3://" + S3TestServer::get().create_bucket("node-local") + "/run";
  // Ranks 0 and 1 share host A's disk, rank 2 is alone on host B.
  const auto host_of = [&](int rank) { return dir / (rank < 2 ? "host-a" : "host-b"); };
  std::vector<std::vector<int64_t>> remote_steps(3);
  on_rank_threads(3, [&](int rank, const c10::intrusive_ptr<c10d::Store>& store) {
    dcpp::CheckpointManager manager(node_local_options(host_of(rank), url, store, rank, 3));
    for (int64_t step = 1; step <= 3; ++step) {
      dcpp::SaveRequest request;
      request.step = step;
      manager.save(node_local_state(step, rank, 3, false), request);
    }
    manager.wait_for_remote();  // collective with a node-local root
    for (const dcpp::CheckpointInfo& info : manager.list_remote()) {
      remote_steps[rank].push_back(info.step);
    }
  });
  for (int rank = 0; rank < 3; ++rank) {
    CHECK(remote_steps[rank] == std::vector<int64_t>{1, 2, 3});
  }
  // Each disk holds its ranks' files alone; `.metadata` only on the coordinator's.
  const fs::path step_a = host_of(0) / dcpp::step_directory_name(3);
  const fs::path step_b = host_of(2) / dcpp::step_directory_name(3);
  const std::vector<std::string> on_a = node_local_files(step_a);
  const std::vector<std::string> on_b = node_local_files(step_b);
  INFO("host A: " << node_local_joined(on_a) << "; host B: " << node_local_joined(on_b));
  CHECK(std::count(on_a.begin(), on_a.end(), ".metadata") == 1);
  CHECK(std::count(on_b.begin(), on_b.end(), ".metadata") == 0);
  CHECK(std::count(on_b.begin(), on_b.end(), "dcpp_checkpoint.json") == 1);
  for (const std::string& name : on_b) {
    if (name.size() > 7 && name.compare(name.size() - 7, 7, ".distcp") == 0) {
      CHECK(name.rfind("__2_", 0) == 0);
    }
  }
  CHECK(std::none_of(on_a.begin(), on_a.end(),
                     [](const std::string& name) { return name.rfind("__2_", 0) == 0; }));
  // The remote step is a whole checkpoint, without the hosts' part markers.
  dcpp::S3Prefix prefix(url, S3TestServer::get().options());
  for (const dcpp::S3ObjectEntry& object : prefix.list("step-")) {
    CHECK(object.name.find(".dcpp-part-") == std::string::npos);
  }
  dcpp::StateDict whole;
  whole.insert("w", at::zeros({dcpp::test::kNodeLocalRows, 4}, at::kDouble));
  whole.insert("r", at::zeros({3}, at::kDouble));
  dcpp::LoadOptions load;
  load.s3 = S3TestServer::get().options();
  dcpp::load(whole, url + "/" + dcpp::step_directory_name(3), load);
  CHECK(at::equal(whole.at("w").tensor(), node_local_weights(3)));

  // Both disks lost: a job of 2 ranks, each on a new host, resumes step 3 from the store.
  fs::remove_all(host_of(0));
  fs::remove_all(host_of(2));
  std::vector<int64_t> resumed(2, -1);
  std::vector<int> equal(2, 0);  // not vector<bool>: the ranks write their own elements at once
  on_rank_threads(2, [&](int rank, const c10::intrusive_ptr<c10d::Store>& store) {
    dcpp::CheckpointManager manager(
        node_local_options(dir / ("host-" + std::to_string(rank + 3)), url, store, rank, 2));
    dcpp::StateDict state = node_local_state(0, rank, 2, true);
    const std::optional<dcpp::CheckpointInfo> info = manager.restore(state);
    if (info) resumed[rank] = info->step;
    equal[rank] = node_local_state_equals(state, 3, rank, 2) ? 1 : 0;
  });
  for (int rank = 0; rank < 2; ++rank) {
    CHECK(resumed[rank] == 3);
    CHECK(equal[rank] == 1);
  }
}

TEST_CASE("a node-local root needs a remote tier") {
  TempDir dir;
  dcpp::CheckpointManagerOptions options;
  options.root = dir / "ckpt";
  options.node_local_root = true;
  try {
    dcpp::CheckpointManager manager(options);
    FAIL("a node-local root without a remote tier was accepted");
  } catch (const dcpp::CheckpointError& error) {
    CHECK(error.kind() == dcpp::ErrorKind::kUsage);
    CHECK_THAT(std::string(error.what()), Catch::Contains("needs a remote tier"));
  }
}

TEST_CASE("a node-local restore on one rank drains what the root holds before it chooses") {
  TempDir dir;
  const std::string url = "s3://" + S3TestServer::get().create_bucket("node-local-one") + "/run";
  dcpp::CheckpointManagerOptions options;
  options.root = dir / "host";
  options.node_local_root = true;
  options.async = false;
  options.remote.url = url;
  options.remote.s3 = S3TestServer::get().options();
  {
    dcpp::CheckpointManager manager(options);
    manager.save(node_local_state(1, 0, 1, false), dcpp::test::request(1));
    manager.wait_for_remote();
    // The store refuses step 2's data: it stays on the local disk alone.
    refuse_uploads_to("step-00000002/__0_");
    manager.save(node_local_state(2, 0, 1, false), dcpp::test::request(2));
    CHECK_THROWS_AS(manager.wait_for_remote(), dcpp::CheckpointError);
    S3TestServer::get().clear_faults();
  }
  // The store is back: the restart resumes step 2, which its first drain takes up, not step 1.
  dcpp::CheckpointManager restarted(options);
  dcpp::StateDict state = node_local_state(0, 0, 1, true);
  const std::optional<dcpp::CheckpointInfo> info = restarted.restore(state);
  REQUIRE(info);
  CHECK(info->step == 2);
  CHECK(node_local_state_equals(state, 2, 0, 1));
}

TEST_CASE(
    "a host whose drain fails fails wait_for_remote on every rank naming it and loses nothing") {
  TempDir dir;
  const std::string url = "s3://" + S3TestServer::get().create_bucket("node-local-fail") + "/run";
  const auto host_of = [&](int rank) { return dir / (rank < 2 ? "host-a" : "host-b"); };
  // Rank 2's file, alone on host B, is refused by the store every time.
  refuse_uploads_to("/__2_");
  std::vector<std::string> errors(3);
  std::vector<std::vector<int64_t>> remote_after(3);
  on_rank_threads(3, [&](int rank, const c10::intrusive_ptr<c10d::Store>& store) {
    dcpp::CheckpointManager manager(node_local_options(host_of(rank), url, store, rank, 3));
    manager.save(node_local_state(1, rank, 3, false), dcpp::test::request(1));
    try {
      manager.wait_for_remote();
    } catch (const dcpp::CheckpointError& e) {
      errors[rank] = e.what();
    }
    if (rank == 0) S3TestServer::get().clear_faults();
    manager.wait_for_remote();  // the store takes it now: the step was kept and goes up
    for (const dcpp::CheckpointInfo& info : manager.list_remote()) {
      remote_after[rank].push_back(info.step);
    }
  });
  for (int rank = 0; rank < 3; ++rank) {
    INFO("rank " << rank << ": " << errors[rank]);
    CHECK_THAT(errors[rank], Catch::Contains("rank 2: ") && Catch::Contains("__2_0.distcp"));
    CHECK(remote_after[rank] == std::vector<int64_t>{1});
  }
}

TEST_CASE("a save whose commit fails on one host leaves no step on the others, and drains go on") {
  // Blocking: the ranks learn of the failure together, and host B withdraws its commit. Async:
  // each host's leader commits alone; host B's part, deleted by the coordinator, stays local.
  const bool async = GENERATE(false, true);
  INFO((async ? "async" : "blocking") << " saves");
  TempDir dir;
  const std::string url = "s3://" + S3TestServer::get().create_bucket("node-local-commit") + "/run";
  const auto host_of = [&](int rank) { return dir / (rank < 2 ? "host-a" : "host-b"); };
  std::vector<std::string> save_errors(3), first_errors(3), drain_errors(3);
  std::vector<std::vector<int64_t>> remote_after(3);
  on_rank_threads(3, [&](int rank, const c10::intrusive_ptr<c10d::Store>& store) {
    dcpp::CheckpointManagerOptions options = node_local_options(host_of(rank), url, store, rank, 3);
    options.async = async;
    dcpp::CheckpointManager manager(options);
    manager.save(node_local_state(1, rank, 3, false), dcpp::test::request(1));
    manager.wait();
    if (rank == 0) {
      // The coordinator's manifest of step 2 cannot be written: a directory is in its way.
      fs::create_directories(host_of(0) / "step-00000002.incomplete" / "dcpp_checkpoint.json.tmp" /
                             "in-the-way");
    }
    try {
      manager.save(node_local_state(2, rank, 3, false), dcpp::test::request(2));
    } catch (const dcpp::CheckpointError& e) {
      save_errors[rank] = e.what();
    }
    manager.save(node_local_state(3, rank, 3, false), dcpp::test::request(3));
    try {
      manager.wait_for_remote();  // async: the coordinator's commit error of step 2, once
    } catch (const dcpp::CheckpointError& e) {
      first_errors[rank] = e.what();
    }
    try {
      manager.wait_for_remote();
      manager.wait_for_remote();  // nothing of step 2 goes up or comes down again
    } catch (const dcpp::CheckpointError& e) {
      drain_errors[rank] = e.what();
    }
    for (const dcpp::CheckpointInfo& info : manager.list_remote()) {
      remote_after[rank].push_back(info.step);
    }
  });
  for (int rank = 0; rank < 3; ++rank) {
    INFO("rank " << rank << ": save: " << save_errors[rank]
                 << "; first wait: " << first_errors[rank] << "; drain: " << drain_errors[rank]);
    if (async) {
      CHECK(save_errors[rank].empty());
      if (rank == 0) CHECK_THAT(first_errors[rank], Catch::Contains("dcpp_checkpoint.json.tmp"));
    } else {
      CHECK_THAT(save_errors[rank], Catch::Contains("committing"));
      CHECK(first_errors[rank].empty());
    }
    CHECK(drain_errors[rank].empty());
    CHECK(remote_after[rank] == std::vector<int64_t>{1, 3});
  }
  if (!async) CHECK_FALSE(fs::exists(host_of(2) / "step-00000002"));  // withdrawn on host B
}
