// One rank of the node-local roots test on real hosts (tests/plugin/node_local_hosts_test.cpp),
// started by dcpp-launch with the torchrun variables set, the store from the AWS_* variables:
//
//   node_local_worker save ROOT URL STEPS    saves steps 1..STEPS through an async manager on the
//                                            node-local root ROOT draining to URL, waits for the
//                                            drain, then prints "rank R host H remote steps
//                                            1 2 ..." and, on each host's first rank, "rank R host
//                                            H files <the files of its last step directory>"
//   node_local_worker resume ROOT URL STEP   restores on the node-local root ROOT from URL and
//                                            prints "rank R resumed step S: values equal" when
//                                            every value equals step STEP's, else what differs
//
// Exits 0 when it got that far; errors are printed as "rank R failed: ...". The state: "w", a
// 6 x 4 float64 tensor sharded by rows over the ranks, and "r", a replicated one; both depend on
// the step (node_local_state.h).

#include "../node_local_state.h"

#include <dcpp/dcpp.h>
#include <dcpp/dist.h>
#include <dcpp/dist/launched_rank.h>
#include <dcpp/dist/process_group.h>

#include <ATen/ATen.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include <unistd.h>

namespace fs = std::filesystem;

namespace {

std::string host() {
  char name[256] = {};
  ::gethostname(name, sizeof(name) - 1);
  return name;
}

int run(const std::string& mode, const fs::path& root, const std::string& url, int64_t steps) {
  const dcpp::LaunchEnvironment env = dcpp::LaunchEnvironment::from_env();
  const c10::intrusive_ptr<c10d::Store> store = dcpp::make_tcp_store(env);
  dcpp::CheckpointManager manager(dcpp::CheckpointManagerOptions()
                                      .with_root(root)
                                      .with_node_local_root(true)
                                      .with_remote(dcpp::RemoteTierOptions().with_url(url))
                                      .with_store(store, env.rank, env.world_size));
  if (mode == "save") {
    for (int64_t step = 1; step <= steps; ++step) {
      dcpp::SaveRequest request;
      request.step = step;
      manager.save(dcpp::test::node_local_state(step, env.rank, env.world_size, false), request);
    }
    manager.wait_for_remote();
    std::string remote;
    for (const dcpp::CheckpointInfo& info : manager.list_remote()) {
      remote += " " + std::to_string(info.step);
    }
    std::printf("rank %d host %s remote steps%s\n", env.rank, host().c_str(), remote.c_str());
    if (env.local_rank == 0) {
      std::string files;
      std::vector<std::string> names;
      for (const auto& entry : fs::directory_iterator(root / dcpp::step_directory_name(steps))) {
        names.push_back(entry.path().filename().string());
      }
      std::sort(names.begin(), names.end());
      for (const std::string& name : names) files += " " + name;
      std::printf("rank %d host %s files%s\n", env.rank, host().c_str(), files.c_str());
    }
    return 0;
  }
  dcpp::StateDict state = dcpp::test::node_local_state(0, env.rank, env.world_size, true);
  const std::optional<dcpp::CheckpointInfo> info = manager.restore(state);
  const bool equal = info && info->step == steps &&
                     dcpp::test::node_local_state_equals(state, steps, env.rank, env.world_size);
  std::printf("rank %d resumed step %lld: %s\n", env.rank,
              static_cast<long long>(info ? info->step : -1),
              equal ? "values equal" : "values differ");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  dcpp::become_launched_rank();  // dcpp-launch --fork: the ranks fork from here
  if (argc != 5) {
    std::fprintf(stderr, "usage: node_local_worker save|resume ROOT URL STEPS\n");
    return 2;
  }
  try {
    return run(argv[1], argv[2], argv[3], std::stoll(argv[4]));
  } catch (const std::exception& e) {
    std::printf("rank %s failed: %s\n", std::getenv("RANK") ? std::getenv("RANK") : "?", e.what());
    return 1;
  }
}
