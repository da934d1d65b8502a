// The memory tier's replicas on two hosts of their own: each host a mount and a UTS namespace
// with a /dev/shm of its own (a directory bound over it, so that it outlives the job as a host's
// memory does) and a host name, sharing the network and the disk. memory_tier_resume trains on
// 2 x 2 ranks, every step to memory with one replica on the other host, every 4th to disk. Rank 2
// dies mid-step; the second host's memory is wiped (a new machine): the job resumes on 4 ranks,
// the second host's ranks from the first host's replicas (sent over the group), bit for bit with
// an uninterrupted run, and on the first host's 2 ranks alone, resharded.

#include "dcpp_test.h"

#include <dcpp/plugin/checkpoint_info.h>

#include <unistd.h>

#include <cmath>
#include <future>
#include <regex>

namespace fs = std::filesystem;
using dcpp::test::CommandResult;
using dcpp::test::run_command;
using dcpp::test::TempDir;

namespace {

// Runs memory_tier_resume `args`, 2 ranks a host (dcpp-launch with `launcher_args`), on hosts whose
// memories are the directories `memories` (one host each, named dcpp-mem-host-1, -2...), at once;
// the memory tier is named after `job`. Returns each host's output.
std::vector<CommandResult> run_on_hosts(const std::vector<fs::path>& memories,
                                        const std::string& job, const std::string& args,
                                        const std::string& launcher_args = "") {
  const std::string namespaces =
      geteuid() == 0 ? "--mount --uts" : "--user --map-root-user --mount --uts";
  const int port = dcpp::test::free_loopback_port();
  std::vector<std::future<CommandResult>> running;
  for (std::size_t node = 0; node < memories.size(); ++node) {
    const std::string name = "dcpp-mem-host-" + std::to_string(node + 1);
    const std::string command =
        "unshare " + namespaces + " sh -c 'mount --bind " + memories[node].string() +
        " /dev/shm && { hostname " + name + " 2>/dev/null || echo " + name +
        " > /proc/sys/kernel/hostname; } && exec env SLURM_JOB_ID=" + job + " " + DCPP_LAUNCH +
        " --fork --nnodes " + std::to_string(memories.size()) + " --node-rank " +
        std::to_string(node) + " --master-addr 127.0.0.1 --master-port " + std::to_string(port) +
        " -n 2 " + launcher_args + " -- " + DCPP_MEMORY_TIER_EXAMPLE + " " + args + "' 2>&1";
    running.push_back(std::async(std::launch::async, [command] { return run_command(command); }));
  }
  std::vector<CommandResult> results;
  for (auto& host : running) results.push_back(host.get());
  return results;
}

std::string all_output(const std::vector<CommandResult>& results) {
  std::string text;
  for (std::size_t host = 0; host < results.size(); ++host) {
    text += "== host " + std::to_string(host + 1) + " (exit " +
            std::to_string(results[host].exit_code) + "):\n" + results[host].output;
  }
  return text;
}

// Each step's loss ("step S loss L", L a hexadecimal float) from step `first` on, by step.
std::map<int, double> losses_from(const std::string& output, int first) {
  std::map<int, double> losses;
  const std::regex line("step ([0-9]+) loss ([-0-9a-fx.p+]+)");
  for (auto it = std::sregex_iterator(output.begin(), output.end(), line);
       it != std::sregex_iterator(); ++it) {
    const int step = std::stoi((*it)[1]);
    if (step >= first) losses[step] = std::strtod((*it)[2].str().c_str(), nullptr);
  }
  return losses;
}

// The step rank `rank` resumed at, from the line memory_tier_resume prints, and where from.
std::pair<int, std::string> resumed(const std::string& output, int rank) {
  const std::regex line("rank " + std::to_string(rank) +
                        " resumed from '([^']*)' at step ([0-9]+)");
  std::smatch found;
  if (!std::regex_search(output, found, line)) return {-1, ""};
  return {std::stoi(found[2]), found[1]};
}

// A directory under `dir` for a host's memory (bound over its /dev/shm).
fs::path host_memory(const fs::path& dir, const std::string& name) {
  fs::create_directories(dir / name);
  return dir / name;
}

// The losses of an uninterrupted run of 10 steps on 2 x 2 ranks with one replica (its memory
// tier named after `job`), by step; its hosts' output in `output`.
std::map<int, double> uninterrupted_losses(const fs::path& dir, const std::string& job,
                                           std::string* output) {
  const auto whole = run_on_hosts({host_memory(dir, "whole-1"), host_memory(dir, "whole-2")},
                                  job + "-whole", (dir / "whole").string() + " 10 -1 1 1");
  *output = all_output(whole);
  if (whole[0].exit_code != 0 || whole[1].exit_code != 0) return {};
  return losses_from(whole[0].output, 1);
}

}  // namespace

TEST_CASE("a host lost: the job resumes from the replicas on 4 ranks, bit for bit, and on 2") {
  TempDir dir;
  const std::string job = "hosts-" + std::to_string(::getpid());
  std::string whole_output;
  const std::map<int, double> whole_losses = uninterrupted_losses(dir.path(), job, &whole_output);
  INFO(whole_output);
  REQUIRE(whole_losses.size() == 10);

  // Rank 2, on the second host, dies in the middle of step 7; its host's other rank is stopped
  // by its launcher, the first host's ranks fail on the next collective.
  const fs::path first_host = host_memory(dir.path(), "host-1"),
                 second_host = host_memory(dir.path(), "host-2");
  const std::string root = (dir / "ckpt").string();
  const auto killed = run_on_hosts({first_host, second_host}, job, root + " 10 6 2 1");
  INFO(all_output(killed));
  REQUIRE(killed[1].exit_code != 0);
  REQUIRE(killed[1].output.find("rank 2: SIGKILL in the middle of step 7") != std::string::npos);
  // The second host is replaced: its memory is empty. The first host's memory and the disk are
  // copied for the run on fewer hosts below.
  fs::remove_all(second_host);
  fs::create_directories(second_host);
  fs::copy(first_host, dir / "host-1-again", fs::copy_options::recursive);
  fs::copy(root, dir / "ckpt-again", fs::copy_options::recursive);

  const auto again = run_on_hosts({first_host, second_host}, job, root + " 10 -1 1 1");
  const std::string again_output = all_output(again);
  INFO(again_output);
  REQUIRE(again[0].exit_code == 0);
  REQUIRE(again[1].exit_code == 0);
  // Step 6 was in memory on both hosts unless rank 2 died before its replica left (the round runs
  // in the background): then step 5, never the disk's step 4.
  const int step = resumed(again_output, 0).first;
  CHECK((step == 6 || step == 5));
  for (int rank = 0; rank < 4; ++rank) {
    INFO("rank " << rank);
    const auto [at, from] = resumed(again_output, rank);
    CHECK(at == step);
    const std::string owner = std::to_string(rank);
    if (rank < 2) {
      CHECK(std::regex_match(
          from, std::regex("/dev/shm/dcpp\\.slurm-" + job + "\\." + owner + "\\.[01]")));
    } else {  // the first host's replica, sent
      CHECK(from == "/dev/shm/dcpp.slurm-" + job + "." + owner + ".at" + std::to_string(rank - 2));
    }
  }
  const std::map<int, double> again_losses = losses_from(again[0].output, step + 1);
  REQUIRE(static_cast<int>(again_losses.size()) == 10 - step);
  for (const auto& [at, loss] : again_losses) {
    INFO("step " << at);
    CHECK(loss == whole_losses.at(at));  // bit for bit
  }

  // The first host alone, 2 ranks: the four ranks' steps resharded (each rank takes every one).
  const auto fewer =
      run_on_hosts({dir / "host-1-again"}, job, (dir / "ckpt-again").string() + " 10");
  const std::string fewer_output = all_output(fewer);
  INFO(fewer_output);
  REQUIRE(fewer[0].exit_code == 0);
  for (int rank = 0; rank < 2; ++rank) CHECK(resumed(fewer_output, rank).first == step);
  CHECK(fewer_output.find("resharded from 4 ranks") != std::string::npos);
  // The same training on half the ranks: the same losses but for the order of the sums.
  const std::map<int, double> fewer_losses = losses_from(fewer[0].output, step + 1);
  REQUIRE(static_cast<int>(fewer_losses.size()) == 10 - step);
  for (const auto& [at, loss] : fewer_losses) {
    INFO("step " << at);
    CHECK(std::abs(loss - whole_losses.at(at)) <= 1e-5 * std::abs(whole_losses.at(at)));
  }
}

TEST_CASE("a job over two hosts that dies: node 0's launcher writes its newest memory step") {
  TempDir dir;
  const std::string job = "hosts-flush-" + std::to_string(::getpid());
  std::string whole_output;
  const std::map<int, double> whole_losses = uninterrupted_losses(dir.path(), job, &whole_output);
  INFO(whole_output);
  REQUIRE(whole_losses.size() == 10);

  // Rank 2 dies in the middle of step 7; node 0's host holds its ranks' slots and the replicas of
  // ranks 2 and 3: it writes the newest step they make up (the disk has step 4).
  const std::string root = (dir / "ckpt").string();
  const auto killed =
      run_on_hosts({host_memory(dir.path(), "host-1"), host_memory(dir.path(), "host-2")}, job,
                   root + " 10 6 2 1", "--memory-root " + root + " --memory-job slurm-" + job);
  const std::string killed_output = all_output(killed);
  INFO(killed_output);
  REQUIRE(killed[1].exit_code != 0);
  const std::optional<dcpp::CheckpointInfo> written = dcpp::latest_checkpoint(root);
  REQUIRE(written);
  CHECK((written->step == 6 || written->step == 5));
  CHECK(written->world_size == 4);
  CHECK(killed[0].output.find("step " + std::to_string(written->step) + " of 4 ranks written to") !=
        std::string::npos);
  CHECK(killed[1].output.find("node 1 leaves writing the job's newest memory step to node 0") !=
        std::string::npos);
  CHECK(fs::is_empty(dir / "host-1"));  // node 0's regions removed

  // Two new hosts, no memory: the job resumes from that step on disk, bit for bit.
  const auto again =
      run_on_hosts({host_memory(dir.path(), "new-1"), host_memory(dir.path(), "new-2")}, job,
                   root + " 10 -1 1 1");
  const std::string again_output = all_output(again);
  INFO(again_output);
  REQUIRE(again[0].exit_code == 0);
  for (int rank = 0; rank < 4; ++rank) {
    CHECK(resumed(again_output, rank) ==
          std::pair<int, std::string>(static_cast<int>(written->step), written->path.string()));
  }
  const std::map<int, double> again_losses =
      losses_from(again[0].output, static_cast<int>(written->step) + 1);
  REQUIRE(static_cast<int>(again_losses.size()) == 10 - written->step);
  for (const auto& [at, loss] : again_losses) CHECK(loss == whole_losses.at(at));
}
