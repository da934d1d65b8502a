// Node-local roots on hosts of their own: each host is a mount and a UTS namespace (a disk of its
// own, a tmpfs at the root's path, and a host name) sharing the network, as hosts share the
// network the store is reached through. Two hosts of two ranks each save through their node-local
// roots and drain to the real S3 server; the disks then go (the namespaces end), and a job of three
// ranks on three new hosts resumes from the store, bit for bit. The ranks are real processes
// (node_local_worker, one dcpp-launch per host).

#include "dcpp_test.h"
#include "storage/s3_test_server.h"

#include <future>
#include <string>
#include <vector>

#include <unistd.h>

namespace fs = std::filesystem;
using dcpp::test::CommandResult;
using dcpp::test::run_command;
using dcpp::test::S3TestServer;
using dcpp::test::TempDir;

namespace {

// Runs `ranks_per_host` ranks of node_local_worker `mode` on each of `hosts` hosts at once, each
// in namespaces of its own with a new, empty disk at `root`; returns each host's output.
std::vector<CommandResult> run_on_hosts(int hosts, int ranks_per_host, const std::string& mode,
                                        const fs::path& root, const std::string& url, int64_t steps,
                                        const std::string& host_prefix) {
  const std::string namespaces =
      geteuid() == 0 ? "--mount --uts" : "--user --map-root-user --mount --uts";
  const int port = dcpp::test::free_loopback_port();
  const std::string aws = "AWS_ENDPOINT_URL=" + S3TestServer::get().endpoint() +
                          " AWS_REGION=us-east-1 AWS_ACCESS_KEY_ID=S3RVER "
                          "AWS_SECRET_ACCESS_KEY=S3RVER";
  std::vector<std::future<CommandResult>> running;
  for (int node = 0; node < hosts; ++node) {
    const std::string name = host_prefix + std::to_string(node + 1);
    const std::string command =
        "unshare " + namespaces + " sh -c 'mount -t tmpfs " + name + " " + root.string() +
        " && { hostname " + name + " 2>/dev/null || echo " + name +
        " > /proc/sys/kernel/hostname; } && exec env " + aws + " " + DCPP_LAUNCH +
        " --fork --nnodes " + std::to_string(hosts) + " --node-rank " + std::to_string(node) +
        " --master-addr 127.0.0.1 --master-port " + std::to_string(port) + " -n " +
        std::to_string(ranks_per_host) + " -- " + DCPP_NODE_LOCAL_WORKER + " " + mode + " " +
        root.string() + " " + url + " " + std::to_string(steps) + "' 2>&1";
    running.push_back(std::async(std::launch::async, [command] { return run_command(command); }));
  }
  std::vector<CommandResult> results;
  for (auto& host : running) results.push_back(host.get());
  return results;
}

std::string hosts_output(const std::vector<CommandResult>& results) {
  std::string text;
  for (size_t host = 0; host < results.size(); ++host) {
    text += "== host " + std::to_string(host + 1) + " (exit " +
            std::to_string(results[host].exit_code) + "):\n" + results[host].output;
  }
  return text;
}

// The line of `output` that starts with `start`, or "".
std::string hosts_line(const std::string& output, const std::string& start) {
  const size_t at = output.find(start);
  if (at == std::string::npos) return {};
  return output.substr(at, output.find('\n', at) - at);
}

}  // namespace

TEST_CASE("node-local roots on two hosts drain to the store; three new hosts resume from it") {
  TempDir dir;
  const fs::path root = dir / "local-nvme";
  fs::create_directories(root);
  const std::string url = "s3://" + S3TestServer::get().create_bucket("node-local-hosts") + "/job";

  const std::vector<CommandResult> saved = run_on_hosts(2, 2, "save", root, url, 3, "dcpp-host-");
  const std::string output = hosts_output(saved);
  INFO(output);
  REQUIRE(saved[0].exit_code == 0);
  REQUIRE(saved[1].exit_code == 0);
  for (int rank = 0; rank < 4; ++rank) {
    const std::string host = rank < 2 ? "dcpp-host-1" : "dcpp-host-2";
    CHECK(hosts_line(output, "rank " + std::to_string(rank) + " host " + host + " remote steps") ==
          "rank " + std::to_string(rank) + " host " + host + " remote steps 1 2 3");
  }
  // Each disk held its own ranks' files; `.metadata` was on the coordinator's alone.
  const std::string first = hosts_line(output, "rank 0 host dcpp-host-1 files");
  const std::string second = hosts_line(output, "rank 2 host dcpp-host-2 files");
  CHECK(first.find(" .metadata") != std::string::npos);
  CHECK(first.find("__0_") != std::string::npos);
  CHECK(first.find("__1_") != std::string::npos);
  CHECK(first.find("__2_") == std::string::npos);
  CHECK(first.find("__3_") == std::string::npos);
  CHECK(second.find(" .metadata") == std::string::npos);
  CHECK(second.find("dcpp_checkpoint.json") != std::string::npos);
  CHECK(second.find("__2_") != std::string::npos);
  CHECK(second.find("__3_") != std::string::npos);
  CHECK(second.find("__0_") == std::string::npos);

  // Both disks are gone with their namespaces; three ranks on three new hosts resume.
  const std::vector<CommandResult> resumed =
      run_on_hosts(3, 1, "resume", root, url, 3, "dcpp-new-host-");
  const std::string resume_output = hosts_output(resumed);
  INFO(resume_output);
  for (int rank = 0; rank < 3; ++rank) {
    CHECK(resumed[rank].exit_code == 0);
    CHECK(resume_output.find("rank " + std::to_string(rank) + " resumed step 3: values equal") !=
          std::string::npos);
  }
  CHECK(fs::is_empty(root));  // nothing reached the real disk under the mounts
}
