// The memory tier's replicas and a restarted job's first step (issue 40, docs/performance.md), on
// two hosts of one rank each: each a mount and UTS namespace with a /dev/shm of its own (a
// directory of the real one bound over it, so that it outlives the job as a host's memory does),
// sharing the network (Gloo on loopback) and the disk, one dcpp-launch per host.
//   1. replication: each rank's step of --gib GiB, copied into its slot by save_to_memory and
//      sent to the other rank's replica slot in the background (a clique's round: both ways at
//      once), timed from the end of save_to_memory to wait_for_memory_replicas(); against raw
//      Gloo sends of the same bytes between the same processes (each rank sends its buffer and
//      receives the other's, at once), in the same run. Best of --repeat.
//   2. restart: a new job's restore of that state, from its CheckpointManager's construction to
//      restore()'s return (the first step may start then), the slower rank's: from memory (both
//      hosts' intact), from a peer (the second host's memory wiped: its rank receives the first
//      host's replica), from the local disk with the page cache dropped (both memories wiped),
//      and, with --remote s3://BUCKET/PREFIX (the store from AWS_*), from the S3 server (the
//      memories and the local disk wiped).
//
//   memory_replication_bench [--gib G] [--repeat N] [--remote s3://BUCKET/PREFIX]
//
// Needs root or user namespaces (unshare, util-linux) and dcpp-launch (built beside it).

#include <dcpp/dcpp.h>
#include <dcpp/dist.h>

#include "bench_common.h"

#include <torch/torch.h>

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <future>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

constexpr int64_t kPieceBytes = 64 << 20;

struct Options {
  double gib = 1;
  int repeat = 3;
  std::string remote;
  std::string worker;  // "save" or "restore": a rank of a phase (set by the orchestrator)
  std::string root;
};

// Rank `rank`'s state: --gib GiB of floats in 64 MiB tensors of its own (`target`: zeros to
// restore into).
dcpp::StateDict state_of(int rank, double gib, bool target) {
  dcpp::StateDict state;
  const int64_t pieces = std::max<int64_t>(1, static_cast<int64_t>(gib * (1 << 30) / kPieceBytes));
  for (int64_t i = 0; i < pieces; ++i) {
    at::Tensor t = at::empty({kPieceBytes / 4}, at::kFloat);
    if (target) {
      t.zero_();
    } else {
      t.fill_(static_cast<float>(rank * 1000 + i));
    }
    state.insert("rank" + std::to_string(rank) + ".w" + std::to_string(i), t);
  }
  return state;
}

dcpp::CheckpointManagerOptions manager_options(const Options& o, const dcpp::LaunchEnvironment& env,
                                               const c10::intrusive_ptr<c10d::Store>& store) {
  dcpp::CheckpointManagerOptions options;
  options.with_root(o.root).with_async(false).with_store(store, env.rank, env.world_size);
  options.with_memory(dcpp::MemoryTierOptions().with_every_steps(1).with_job("bench").with_replicas(
      1, dcpp::make_gloo_process_group(store, env.rank, env.world_size,
                                       dcpp::ProcessGroupOptions().with_group_name("replicas"))));
  if (!o.remote.empty()) options.with_remote(dcpp::RemoteTierOptions().with_url(o.remote));
  return options;
}

// One rank of a phase: prints "result NAME SECONDS" lines.
int run_worker(const Options& o) {
  const auto started = bench::Clock::now();
  const dcpp::LaunchEnvironment env = dcpp::LaunchEnvironment::from_env();
  const c10::intrusive_ptr<c10d::Store> store = dcpp::make_tcp_store(env);
  if (o.worker == "restore") {
    dcpp::StateDict target = state_of(env.rank, o.gib, /*target=*/true);
    const auto start = bench::Clock::now();
    dcpp::CheckpointManager manager(manager_options(o, env, store));
    const std::optional<dcpp::CheckpointInfo> info = manager.restore(target);
    const double seconds = bench::seconds_since(start);
    const std::string first = "rank" + std::to_string(env.rank) + ".w0";
    const bool equal = info && target.at(first).tensor().equal(
                                   state_of(env.rank, 64.0 / 1024, false).at(first).tensor());
    std::printf("result restore %.4f %s %s (process start to restored: %.3f s)\n", seconds,
                info ? info->path.c_str() : "-", equal ? "equal" : "NOT-EQUAL",
                bench::seconds_since(started));
    return equal ? 0 : 1;
  }
  const dcpp::StateDict state = state_of(env.rank, o.gib, false);
  const int peer = 1 - env.rank;
  // Raw Gloo: this rank's bytes to the peer and the peer's here, at once.
  auto raw = dcpp::make_gloo_process_group(store, env.rank, env.world_size,
                                           dcpp::ProcessGroupOptions().with_group_name("raw"));
  std::vector<at::Tensor> mine, theirs;
  for (const auto& [key, item] : state) {
    mine.push_back(item.tensor());
    theirs.push_back(at::empty_like(item.tensor()));
  }
  const double raw_seconds = bench::best_seconds(
      o.repeat, [] {},
      [&] {
        std::vector<c10::intrusive_ptr<c10d::Work>> work;
        for (std::size_t i = 0; i < mine.size(); ++i) {
          std::vector<at::Tensor> send{mine[i]}, recv{theirs[i]};
          work.push_back(raw->send(send, peer, static_cast<int>(i)));
          work.push_back(raw->recv(recv, peer, static_cast<int>(i)));
        }
        for (auto& w : work) w->wait();
      });
  theirs.clear();
  dcpp::CheckpointManager manager(manager_options(o, env, store));
  double save_seconds = 1e9, replicate_seconds = 1e9;
  for (int r = 0; r < o.repeat; ++r) {
    dcpp::SaveRequest request;
    request.step = r + 1;
    const auto start = bench::Clock::now();
    if (!manager.save_to_memory(state, request)) return 1;
    const auto saved = bench::Clock::now();
    manager.wait_for_memory_replicas();
    save_seconds = std::min(save_seconds, std::chrono::duration<double>(saved - start).count());
    replicate_seconds = std::min(replicate_seconds, bench::seconds_since(saved));
  }
  // The step the restarts read: in memory (and replicated), on disk, and in the store.
  dcpp::SaveRequest request;
  request.step = o.repeat + 1;
  manager.save(state, request);
  manager.wait_for_memory_replicas();
  if (!o.remote.empty()) manager.wait_for_remote();
  std::printf("result raw_exchange %.4f\nresult save_to_memory %.4f\nresult replicate %.4f\n",
              raw_seconds, save_seconds, replicate_seconds);
  return 0;
}

// The orchestrator's view of one phase: each host's output, its results by name (the slower
// rank's value for each).
struct Phase {
  std::string output;
  std::map<std::string, double> results;
  std::string restored_from;
  bool ok = true;
};

Phase run_phase(const std::string& self, const Options& o, const std::vector<fs::path>& memories,
                const std::string& worker, int port) {
  const std::string namespaces =
      geteuid() == 0 ? "--mount --uts" : "--user --map-root-user --mount --uts";
  std::vector<std::future<std::pair<int, std::string>>> hosts;
  for (std::size_t node = 0; node < memories.size(); ++node) {
    std::string command = "unshare " + namespaces + " sh -c 'mount --bind " +
                          memories[node].string() + " /dev/shm && exec " + DCPP_LAUNCH_PROGRAM +
                          " --fork --nnodes " + std::to_string(memories.size()) + " --node-rank " +
                          std::to_string(node) + " --master-addr 127.0.0.1 --master-port " +
                          std::to_string(port) + " -n 1 -- " + self + " --worker " + worker +
                          " --root " + o.root + " --gib " + std::to_string(o.gib) + " --repeat " +
                          std::to_string(o.repeat) +
                          (o.remote.empty() ? "" : " --remote " + o.remote) + "' 2>&1";
    hosts.push_back(std::async(std::launch::async, [command] {
      std::string output;
      FILE* pipe = ::popen(command.c_str(), "r");
      char buffer[4096];
      while (pipe != nullptr && std::fgets(buffer, sizeof buffer, pipe) != nullptr)
        output += buffer;
      const int status = pipe != nullptr ? ::pclose(pipe) : -1;
      return std::make_pair(status, output);
    }));
  }
  Phase phase;
  for (auto& host : hosts) {
    const auto [status, output] = host.get();
    phase.ok = phase.ok && status == 0;
    phase.output += output;
    std::istringstream lines(output);
    std::string line;
    while (std::getline(lines, line)) {
      const std::size_t at = line.find("result ");
      if (at == std::string::npos) continue;
      std::istringstream fields(line.substr(at + 7));
      std::string name, from;
      double value = 0;
      fields >> name >> value >> from;
      phase.results[name] = std::max(phase.results[name], value);
      if (name == "restore" && phase.restored_from.find(from) == std::string::npos) {
        phase.restored_from += (phase.restored_from.empty() ? "" : ", ") + from;
      }
    }
  }
  return phase;
}

void wipe(const fs::path& memory) {
  fs::remove_all(memory);
  fs::create_directories(memory);
}

std::string drop_page_cache() {
  ::sync();
  std::ofstream file("/proc/sys/vm/drop_caches");
  file << "3\n";
  file.flush();
  return file ? "page cache dropped" : "page cache warm (it cannot be dropped by this user)";
}

}  // namespace

int main(int argc, char** argv) {
  dcpp::become_launched_rank();
  Options o;
  CLI::App app("The memory tier's replication against raw Gloo, and restart times by tier");
  app.add_option("--gib", o.gib, "GiB of state per rank (default 1)");
  app.add_option("--repeat", o.repeat, "runs of each timing; the best counts (default 3)");
  app.add_option("--remote", o.remote, "s3://BUCKET/PREFIX: also time a restart from the store");
  app.add_option("--worker", o.worker)->group("");
  app.add_option("--root", o.root)->group("");
  bench::parse_or_exit(app, argc, argv);
  torch::set_num_threads(1);
  if (!o.worker.empty()) return run_worker(o);

  char self[4096] = {};
  const ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return 1;
  // The hosts' memories: directories of the real /dev/shm (a tmpfs), bound over each host's.
  const fs::path memories = "/dev/shm/dcpp-replication-bench-" + std::to_string(::getpid());
  const std::vector<fs::path> hosts = {memories / "host-1", memories / "host-2"};
  for (const fs::path& host : hosts) wipe(host);
  bench::TempDir disk;
  o.root = (disk.path() / "ckpt").string();
  int port = 29500 + static_cast<int>(::getpid() % 1000) * 4;
  int failed = 0;
  const auto phase = [&](const std::string& worker) {
    Phase result = run_phase(self, o, hosts, worker, ++port);
    if (!result.ok) {
      std::fprintf(stderr, "%s failed:\n%s\n", worker.c_str(), result.output.c_str());
      ++failed;
    }
    return result;
  };

  const double bytes = static_cast<double>(state_of(0, o.gib, true).size()) * kPieceBytes;
  std::printf(
      "state: %.2f GiB per rank, 2 ranks on 2 hosts (namespaces), one replica each; best "
      "of %d\n",
      bytes / (1 << 30), o.repeat);
  const Phase saved = phase("save");
  if (failed) return 1;
  const double raw = saved.results.at("raw_exchange"), repl = saved.results.at("replicate");
  std::printf("raw Gloo exchange of the same bytes      %8.3f s  %6.2f GiB/s each way\n", raw,
              bytes / (1 << 30) / raw);
  std::printf("save_to_memory (blocking)                %8.3f s\n",
              saved.results.at("save_to_memory"));
  std::printf("replication round (background)           %8.3f s  %6.2f GiB/s each way  %.2fx raw\n",
              repl, bytes / (1 << 30) / repl, repl / raw);

  const auto restart = [&](const std::string& what) {
    const Phase restored = phase("restore");
    if (restored.ok) {
      std::printf("restart from %-28s %8.3f s  (%s)\n", what.c_str(),
                  restored.results.at("restore"), restored.restored_from.c_str());
    }
  };
  restart("memory");
  wipe(hosts[1]);
  restart("a peer (host 2 wiped)");
  wipe(hosts[0]);
  wipe(hosts[1]);
  const std::string cache = drop_page_cache();
  restart("local disk (" + cache.substr(0, cache.find(' ', 11)) + ")");
  if (!o.remote.empty()) {
    wipe(hosts[0]);
    wipe(hosts[1]);
    fs::remove_all(o.root);
    restart("the S3 server");
  }
  fs::remove_all(memories);
  return failed == 0 ? 0 : 1;
}
