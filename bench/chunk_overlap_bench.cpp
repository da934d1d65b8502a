// The load planner's check that no two saved chunks of a tensor overlap (issue 58,
// planner/saved_chunk_overlap.h), for one tensor of N chunks, smallest N first:
//
//   build/bench/chunk_overlap_bench [--chunks 10000,100000,1000000] [--repeat 3]
//
// Layouts: `rows`, N chunks of 4 rows each (FSDP); `tp8`, N/8 bands of rows times 8 columns
// (FSDP x tensor parallel); `square`, a sqrt(N) x sqrt(N) grid. Each line gives the least thread
// CPU time of `repeat` runs, the time per chunk, and its ratio to the per-chunk time of the
// smallest N of that layout, measured in the same run: about 1 (growing like log N) for a check
// in O(N log N), where comparing every pair would grow like N. `plan` times what the check is
// part of for `rows`: DefaultLoadPlanner::create_local_plan for a rank holding 4 rows of the
// tensor (the check, and intersecting the local shard with every saved chunk).

#include <dcpp/extend.h>

#include "bench_common.h"
#include "planner/saved_chunk_overlap.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

namespace {

constexpr int64_t kRows = 4;  // rows of a chunk
constexpr int64_t kColumns = 8;
constexpr const char* kKey = "model.layers.0.mlp.linear_fc1.weight";

// N chunks of `layout`, in the order a save lists them (rank order), as `.metadata` holds them.
dcpp::TensorStorageMetadata chunks_of(const std::string& layout, int64_t n) {
  int64_t bands = n, columns = 1;
  if (layout == "tp8") {
    columns = 8;
    bands = n / columns;
  } else if (layout == "square") {
    columns = static_cast<int64_t>(std::llround(std::sqrt(static_cast<double>(n))));
    bands = n / columns;
  }
  dcpp::TensorStorageMetadata tensor;
  tensor.properties.dtype = at::kFloat;
  tensor.size = {bands * kRows, columns * kColumns};
  tensor.chunks.reserve(static_cast<std::size_t>(bands * columns));
  for (int64_t b = 0; b < bands; ++b) {
    for (int64_t c = 0; c < columns; ++c) {
      tensor.chunks.push_back({{b * kRows, c * kColumns}, {kRows, kColumns}});
    }
  }
  return tensor;
}

// The least thread CPU time of `repeat` runs of `run`: what it costs while other work shares the
// cores (the machine's two are shared), where wall time also counts waiting for one.
double best_cpu_seconds(int repeat, const std::function<void()>& run) {
  double best = 1e30;
  for (int i = 0; i < repeat; ++i) {
    const double start = bench::thread_cpu_seconds();
    run();
    best = std::min(best, bench::thread_cpu_seconds() - start);
  }
  return best;
}

// create_local_plan of a rank holding rows [0, 4) of `tensor`, loaded from a checkpoint of it.
double plan_seconds(const dcpp::TensorStorageMetadata& tensor, int repeat) {
  dcpp::Metadata metadata;
  metadata.state_dict_metadata.emplace_back(kKey, tensor);
  dcpp::StateDict state;
  state.insert(kKey,
               dcpp::ShardedTensor(tensor.size, {{at::zeros({kRows, tensor.size[1]}), {0, 0}}}));
  dcpp::DefaultLoadPlanner planner;
  planner.set_up(state, metadata, true);
  return best_cpu_seconds(repeat, [&] { planner.create_local_plan(); });
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int64_t> sizes{10000, 100000, 1000000};
  std::vector<std::string> layouts{"rows", "tp8", "square"};
  int repeat = 3;
  CLI::App app("The load planner's overlap check of a tensor's saved chunks, by chunk count",
               "chunk_overlap_bench");
  app.add_option("--chunks", sizes, "chunk counts, smallest first")
      ->delimiter(',')
      ->check(CLI::Range(int64_t{64}, int64_t{1} << 26));
  app.add_option("--layouts", layouts, "rows, tp8, square")->delimiter(',');
  app.add_option("--repeat", repeat, "timed runs per figure (the best is shown)")
      ->check(CLI::Range(1, 100));
  bench::parse_or_exit(app, argc, argv);

  const dcpp::Metadata no_files;  // read only to name the files of an overlap, of which none is
  std::printf("%-7s %9s %10s %12s %14s %9s\n", "layout", "chunks", "check s", "ns/chunk",
              "ratio/smallest", "plan s");
  for (const std::string& layout : layouts) {
    double smallest = 0;
    for (const int64_t n : sizes) {
      const dcpp::TensorStorageMetadata tensor = chunks_of(layout, n);
      const double seconds = best_cpu_seconds(
          repeat, [&] { dcpp::detail::check_saved_chunks_disjoint(kKey, tensor, no_files); });
      const double per_chunk = seconds / static_cast<double>(tensor.chunks.size());
      if (smallest == 0) smallest = per_chunk;
      const std::string plan =
          layout == "rows" ? std::to_string(plan_seconds(tensor, repeat)).substr(0, 6) : "-";
      std::printf("%-7s %9zu %10.4f %12.1f %13.2fx %9s\n", layout.c_str(), tensor.chunks.size(),
                  seconds, per_chunk * 1e9, per_chunk / smallest, plan.c_str());
    }
  }
  std::printf(
      "check: check_saved_chunks_disjoint, least thread CPU time of %d runs; ratio/smallest: "
      "ns/chunk over that of the "
      "layout's smallest count, this run\nplan: DefaultLoadPlanner::create_local_plan of a rank "
      "holding 4 rows (the check and the intersections with every chunk)\n",
      repeat);
  return 0;
}
