// The metadata path at scale: planning, the plan exchange, the global plan and `.metadata` for a
// large number of tensors, on every rank of a job. Run it under dcpp-launch:
//
//   build/tools/dcpp-launch -n 4 -- build/bench/metadata_bench [--tensors N] [--sharded] [--dir D]
//
// N tensors in all (default 100,000): each rank owns N / ranks of them, or with --sharded every
// tensor is split by rows over all ranks (N x ranks chunks). Data items are not written (a storage
// writer records where they would go), so the time is planning + exchange + metadata + commit. As
// a baseline in the same run, rank 0 times pickling the same number of entries with the codec
// alone.

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
  bool sharded = false;
  std::filesystem::path dir = std::filesystem::temp_directory_path() / "dcpp-metadata-bench";
  CLI::App app("Planning and .metadata at scale: N tensors over the ranks", "metadata_bench");
  app.add_option("--tensors", tensors, "tensors in all");
  app.add_flag("--sharded", sharded, "every tensor sharded over every rank");
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
    } else if (i % ranks == rank) {
      state.insert(key, row[0]);
    }
  }
  dcpp::SaveOptions options;
  options.ranks.process_group = group;
  MetadataOnlyWriter writer(dir);
  group->barrier()->wait();
  const auto start = std::chrono::steady_clock::now();
  const double start_cpu = bench::thread_cpu_seconds();
  const dcpp::Metadata metadata = dcpp::save(state, writer, options);
  const double save_seconds = bench::seconds_since(start);
  const double save_cpu_seconds = bench::thread_cpu_seconds() - start_cpu;
  if (rank == 0) {
    const auto size = std::filesystem::file_size(dir / ".metadata");
    const std::size_t chunks = metadata.storage_data.size();
    std::printf("%lld tensors, %zu chunks on %d ranks%s\n", static_cast<long long>(tensors), chunks,
                ranks, sharded ? " (every tensor sharded over all ranks)" : "");
    std::printf(
        "plan + exchange + metadata + commit: %.3f s, %.3f s of CPU on rank 0   (target < 2 s)\n",
        save_seconds, save_cpu_seconds);
    std::printf(".metadata: %.1f MB, %.0f bytes per chunk\n", size / 1e6,
                static_cast<double>(size) / static_cast<double>(chunks));
    const auto decode_start = std::chrono::steady_clock::now();
    const double decode_start_cpu = bench::thread_cpu_seconds();
    const dcpp::Metadata read_back = dcpp::read_metadata(dir);
    std::printf("reading it back (decode): %.3f s, %.3f s of CPU, %zu entries\n",
                bench::seconds_since(decode_start), bench::thread_cpu_seconds() - decode_start_cpu,
                read_back.state_dict_metadata.size());
  }
  return 0;
}
