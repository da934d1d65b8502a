// The coordinator's global step at scale, in one process: DCP's default save planner and the file
// system writer given the local plans of an FSDP job of R ranks, as the coordinator receives them.
//
//   build/bench/global_plan_bench [--ranks 128,256,512,1024] [--tensors 1000] [--dir D]
//
// A model of `tensors` tensors, each split by rows over all R ranks: R x tensors chunks (about a
// million at 1,024 ranks). Timed, on one thread: create_global_plan (dedup, validation, Metadata),
// the writer's prepare_global_plan, and its finish (encoding `.metadata` and the checksum file,
// written without fsync) given every rank's write results. Baselines in the same run: a deep copy
// of the local plans (touching every chunk once) and a raw write() of as many bytes as `.metadata`.
// Also timed: finding the items several ranks list (the replica check's part of the global step,
// SaveOptions::replica_check), before the planner's step, as save() runs it.
// Peak memory is the process's high-water mark after each world size (they run smallest first).

#include <dcpp/extend.h>

#include "bench_common.h"
#include "checkpoint/replicated_items.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

constexpr int64_t kRowsPerRank = 4;
constexpr int64_t kColumns = 1024;

std::string tensor_key(int64_t tensor) {
  return "model.layers." + std::to_string(tensor / 8) + ".weight" + std::to_string(tensor % 8);
}

// What each rank's DefaultSavePlanner::create_local_plan sends: one shard item per tensor, and
// the planner_data of every key.
std::vector<dcpp::SavePlan> local_plans(int ranks, int64_t tensors) {
  std::vector<dcpp::SavePlan> plans(static_cast<std::size_t>(ranks));
  for (int rank = 0; rank < ranks; ++rank) {
    dcpp::SavePlan& plan = plans[static_cast<std::size_t>(rank)];
    plan.items.reserve(static_cast<std::size_t>(tensors));
    for (int64_t t = 0; t < tensors; ++t) {
      const std::vector<int64_t> offsets{rank * kRowsPerRank, 0};
      dcpp::WriteItem item;
      item.index = dcpp::MetadataIndex{tensor_key(t), offsets, std::nullopt};
      item.type = dcpp::WriteItemType::kShard;
      item.tensor_data =
          dcpp::TensorWriteData{dcpp::ChunkStorageMetadata{offsets, {kRowsPerRank, kColumns}},
                                dcpp::TensorProperties{},
                                {ranks * kRowsPerRank, kColumns}};
      plan.items.push_back(std::move(item));
      plan.planner_data.emplace_back(tensor_key(t), dcpp::ObjectPath{tensor_key(t)});
    }
  }
  return plans;
}

// Where each rank's items landed: one data file per rank, items back to back.
std::vector<std::vector<dcpp::WriteResult>> write_results(
    const std::vector<dcpp::SavePlan>& plans) {
  std::vector<std::vector<dcpp::WriteResult>> results(plans.size());
  for (std::size_t rank = 0; rank < plans.size(); ++rank) {
    const std::string file = plans[rank].storage_data + "0.distcp";
    int64_t offset = 0;
    for (const dcpp::WriteItem& item : plans[rank].items) {
      const int64_t bytes = item.tensor_storage_size();
      results[rank].push_back({item.index, bytes, {file, offset, bytes, {}}, 0u});
      offset += bytes;
    }
  }
  return results;
}

// The baseline: write() of `bytes` bytes to a new file, no fsync.
double raw_write_seconds(const fs::path& path, std::size_t bytes) {
  const std::string buffer(bytes, 'x');
  const auto start = bench::Clock::now();
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  std::size_t done = 0;
  while (fd >= 0 && done < bytes) {
    const ssize_t n = ::write(fd, buffer.data() + done, bytes - done);
    if (n <= 0) break;
    done += static_cast<std::size_t>(n);
  }
  if (fd >= 0) ::close(fd);
  const double seconds = bench::seconds_since(start);
  fs::remove(path);
  return seconds;
}

struct Figures {
  double replicas = 0, plan = 0, prepare = 0, finish = 0, cpu = 0, copy = 0, raw_write = 0;
  std::size_t chunks = 0;
  uintmax_t metadata_bytes = 0;
  double peak_mib = 0;
};

Figures measure(int ranks, int64_t tensors, const fs::path& dir) {
  Figures f;
  std::vector<dcpp::SavePlan> plans = local_plans(ranks, tensors);
  {
    const auto start = bench::Clock::now();
    const std::vector<dcpp::SavePlan> copy = plans;
    f.copy = bench::seconds_since(start);
  }
  fs::remove_all(dir);
  dcpp::DefaultSavePlanner planner;
  dcpp::FileSystemWriter writer(dir, dcpp::FileSystemWriterOptions().with_sync_files(false));
  writer.set_up(0, true);

  const double cpu_start = bench::thread_cpu_seconds();
  auto start = bench::Clock::now();
  const dcpp::detail::ReplicatedItems replicated = dcpp::detail::find_replicated_items(plans);
  f.replicas = bench::seconds_since(start);
  if (!replicated.items.empty()) {
    std::fprintf(stderr, "an FSDP job has no replicated items, yet %zu were found\n",
                 replicated.items.size());
    std::exit(1);
  }

  start = bench::Clock::now();
  auto [global_plans, metadata] = planner.create_global_plan(std::move(plans));
  f.plan = bench::seconds_since(start);

  start = bench::Clock::now();
  global_plans = writer.prepare_global_plan(std::move(global_plans));
  f.prepare = bench::seconds_since(start);

  const double planning_cpu = bench::thread_cpu_seconds() - cpu_start;
  const auto results = write_results(global_plans);  // what the ranks send back: not timed
  const double cpu_before_finish = bench::thread_cpu_seconds();
  start = bench::Clock::now();
  writer.finish(std::move(metadata), results);
  f.finish = bench::seconds_since(start);
  f.cpu = planning_cpu + (bench::thread_cpu_seconds() - cpu_before_finish);

  for (const auto& rank_results : results) f.chunks += rank_results.size();
  f.metadata_bytes = fs::file_size(dir / ".metadata");
  f.raw_write = raw_write_seconds(dir / "raw-write", static_cast<std::size_t>(f.metadata_bytes));
  f.peak_mib = bench::resident_memory().peak_mib;
  fs::remove_all(dir);
  return f;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> world_sizes{128, 256, 512, 1024};
  int64_t tensors = 1000;
  fs::path dir = fs::temp_directory_path() / "dcpp-global-plan-bench";
  CLI::App app("The coordinator's global step of an FSDP job at scale, in one process",
               "global_plan_bench");
  app.add_option("--ranks", world_sizes, "world sizes, smallest first")
      ->delimiter(',')
      ->check(CLI::Range(1, 1 << 16));
  app.add_option("--tensors", tensors, "tensors in the model, each split over every rank")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 24));
  app.add_option("--dir", dir, "scratch directory (removed after each world size)");
  bench::parse_or_exit(app, argc, argv);

  std::printf("%lld tensors of [ranks x %lld, %lld] float32, each split by rows over every rank\n",
              static_cast<long long>(tensors), static_cast<long long>(kRowsPerRank),
              static_cast<long long>(kColumns));
  std::printf("%6s %9s %10s %9s %9s %9s %9s %9s %10s %9s %9s %9s\n", "ranks", "chunks",
              "replicas s", "plan s", "prepare s", "finish s", "total s", "CPU s", ".metadata",
              "peak MiB", "/copy", "/write");
  for (const int ranks : world_sizes) {
    const Figures f = measure(ranks, tensors, dir);
    const double total = f.replicas + f.plan + f.prepare + f.finish;
    std::printf("%6d %9zu %10.3f %9.3f %9.3f %9.3f %9.3f %9.3f %8.1fMB %9.0f %8.1fx %8.1fx\n",
                ranks, f.chunks, f.replicas, f.plan, f.prepare, f.finish, total, f.cpu,
                static_cast<double>(f.metadata_bytes) / 1e6, f.peak_mib, total / f.copy,
                total / f.raw_write);
  }
  std::printf(
      "replicas: finding replicated items (the replica check's step)\ntotal: the four timed "
      "steps, wall; CPU: the same on this thread (target at 1,024 "
      "ranks: < 10 s on one core, < 4096 MiB peak)\n/copy, /write: total over a deep copy "
      "of the local plans and over a raw write() of .metadata's bytes\n");
  return 0;
}
