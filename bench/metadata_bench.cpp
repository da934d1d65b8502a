// The metadata path at scale: planning, the plan exchange, the global plan and `.metadata` for a
// large number of tensors, on every rank of a job. Run it under dcpp-launch:
//
//   build/tools/dcpp-launch -n 4 -- build/bench/metadata_bench [--tensors N]
//       [--sharded | --replicated] [--saves S] [--metadata-everywhere] [--dir D]
//
// N tensors in all (default 100,000): each rank owns N / ranks of them; with --sharded every
// tensor is split by rows over all ranks (N x ranks chunks); with --replicated every rank holds
// every tensor, as data parallel ranks do (N chunks, each written by one rank). Data items are not
// written (a storage writer records where they would go), so the time is planning + exchange +
// metadata + commit. Every rank prints the checkpoint traffic it sent and received during the
// save (checkpoint_traffic()): a rank other than the coordinator receives its own final plan, and
// the committed Metadata only with --metadata-everywhere (otherwise save makes that rank's part of
// it itself). Rank 0 prints what all ranks received per save, in all: the job's traffic. With
// --saves S (2 or more), S saves of the same state go through one SavePlanCache: from the second
// on, the ranks send tokens instead of plans and the coordinator reuses the global plan (plan
// caching); each save's time and traffic is printed.

#include <dcpp/dcpp.h>
#include <dcpp/dist.h>
#include <dcpp/dist/process_group.h>
#include <dcpp/extend.h>

#include "bench_common.h"

#include <ATen/ATen.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <string>

namespace {

// Writes `.metadata` for real but no data: each item is recorded at a made-up place.
class MetadataOnlyWriter final : public dcpp::FileSystemWriter {
 public:
  explicit MetadataOnlyWriter(std::filesystem::path dir)
      : FileSystemWriter(std::move(dir), dcpp::FileSystemWriterOptions().with_sync_files(false)) {}
  std::vector<dcpp::WriteResult> write_data(const dcpp::SavePlan& plan,
                                            dcpp::SavePlanner&) override {
    std::vector<dcpp::WriteResult> results;
    int64_t offset = 0;
    for (const dcpp::WriteItem& item : plan.items) {
      results.push_back({item.index, 1000, {plan.storage_data + "0.distcp", offset, 1000, {}}});
      offset += 1000;
    }
    return results;
  }
};

}  // namespace

int main(int argc, char** argv) {
  int64_t tensors = 100000;
  bool sharded = false, replicated = false;
  int saves = 1;
  std::filesystem::path dir = std::filesystem::temp_directory_path() / "dcpp-metadata-bench";
  CLI::App app("Planning and .metadata at scale: N tensors over the ranks", "metadata_bench");
  app.add_option("--tensors", tensors, "tensors in all");
  auto* sharded_flag = app.add_flag("--sharded", sharded, "every tensor sharded over every rank");
  app.add_flag("--replicated", replicated, "every tensor on every rank (data parallel)")
      ->excludes(sharded_flag);
  app.add_option("--saves", saves,
                 "saves of the same state; from 2, through a SavePlanCache (plan caching)")
      ->check(CLI::PositiveNumber);
  bool metadata_everywhere = false;
  app.add_flag("--metadata-everywhere", metadata_everywhere,
               "every rank gets the whole Metadata back, as DCP returns it "
               "(SaveOptions::metadata_on_every_rank)");
  app.add_option("--dir", dir, "scratch directory");
  bench::parse_or_exit(app, argc, argv);
  auto group = dcpp::make_gloo_process_group_from_env();
  const int rank = group->getRank(), ranks = group->getSize();
  if (rank == 0) {
    std::filesystem::remove_all(dir);
  }
  const at::Tensor row = at::zeros({ranks, 4});
  dcpp::StateDict state;
  for (int64_t i = 0; i < tensors; ++i) {
    const std::string key =
        "layers." + std::to_string(i / 16) + ".block.weight" + std::to_string(i % 16);
    if (sharded) {
      state.insert(key, dcpp::ShardedTensor({ranks, 4}, {{row[rank].unsqueeze(0), {rank, 0}}}));
    } else if (replicated || i % ranks == rank) {
      state.insert(key, row[0]);
    }
  }
  dcpp::SaveOptions options;
  options.ranks.process_group = group;
  options.metadata_on_every_rank = metadata_everywhere;
  if (saves > 1) {
    options.plan_cache = std::make_shared<dcpp::SavePlanCache>();
  }
  dcpp::Metadata metadata;
  std::vector<std::pair<double, double>> times;  // wall and rank 0's CPU, per save
  int64_t bytes_received = 0;                    // by this rank, in all the saves
  for (int n = 1; n <= saves; ++n) {
    MetadataOnlyWriter writer(dir / ("save-" + std::to_string(n)));
    group->barrier()->wait();
    const dcpp::CheckpointTraffic traffic_before = dcpp::checkpoint_traffic();
    const int64_t reused_before = options.plan_cache ? options.plan_cache->reused_plans() : 0;
    const auto start = std::chrono::steady_clock::now();
    const double start_cpu = bench::thread_cpu_seconds();
    metadata = dcpp::save(state, writer, options);
    times.emplace_back(bench::seconds_since(start), bench::thread_cpu_seconds() - start_cpu);
    const dcpp::CheckpointTraffic traffic = dcpp::checkpoint_traffic();
    bytes_received += traffic.bytes_received - traffic_before.bytes_received;
    std::printf(
        "save %d%s: sent %lld bytes in %lld messages, received %lld bytes in %lld messages\n", n,
        options.plan_cache && options.plan_cache->reused_plans() > reused_before
            ? " (global plan reused)"
            : "",
        static_cast<long long>(traffic.bytes_sent - traffic_before.bytes_sent),
        static_cast<long long>(traffic.messages_sent - traffic_before.messages_sent),
        static_cast<long long>(traffic.bytes_received - traffic_before.bytes_received),
        static_cast<long long>(traffic.messages_received - traffic_before.messages_received));
  }
  // The job's traffic: what its ranks received (a broadcast counts once where it is sent, once
  // per rank where it arrives).
  std::vector<at::Tensor> sum{at::tensor({bytes_received}, at::kLong)};
  group->allreduce(sum)->wait();  // also keeps the traffic lines before rank 0's report
  if (rank == 0) {
    std::printf("all %d ranks: %.2f MB received per save in all (metadata %s)\n", ranks,
                static_cast<double>(sum[0].item<int64_t>()) / saves / 1e6,
                metadata_everywhere ? "to every rank" : "on the coordinator only");
    const auto size = std::filesystem::file_size(dir / "save-1" / ".metadata");
    const std::size_t chunks = metadata.storage_data.size();
    std::printf("%lld tensors, %zu chunks on %d ranks%s\n", static_cast<long long>(tensors), chunks,
                ranks,
                sharded      ? " (every tensor sharded over all ranks)"
                : replicated ? " (every tensor on every rank)"
                             : "");
    for (std::size_t n = 0; n < times.size(); ++n) {
      std::printf(
          "save %zu: plan + exchange + metadata + commit: %.3f s, %.3f s of CPU on rank 0%s\n",
          n + 1, times[n].first, times[n].second, n == 0 ? "   (target < 2 s)" : "");
    }
    std::printf(".metadata: %.1f MB, %.0f bytes per chunk\n", size / 1e6,
                static_cast<double>(size) / static_cast<double>(chunks));
    const auto decode_start = std::chrono::steady_clock::now();
    const double decode_start_cpu = bench::thread_cpu_seconds();
    const dcpp::Metadata read_back = dcpp::read_metadata(dir / "save-1");
    std::printf("reading it back (decode): %.3f s, %.3f s of CPU, %zu entries\n",
                bench::seconds_since(decode_start), bench::thread_cpu_seconds() - decode_start_cpu,
                read_back.state_dict_metadata.size());
  }
  return 0;
}
