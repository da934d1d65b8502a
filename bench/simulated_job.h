#pragma once
// A job of R ranks as its coordinator sees it, for the benchmarks of the coordinator at scale
// (global_plan_bench, plan_cache_bench): a model of `tensors` tensors of float32 laid out over the
// ranks, each rank's local plan as DefaultSavePlanner::create_local_plan sends it, and where each
// rank's items land.

#include <dcpp/planner/plan.h>

#include <CLI/CLI.hpp>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace bench {

constexpr int64_t kRowsPerRank = 4;
constexpr int64_t kColumns = 1024;

// How the tensors lie over the ranks. kFsdp: each split by rows over every rank (no replicas).
// kTpDp: tensor parallel over `group` neighbouring ranks, the even tensors split by rows
// (column-parallel layers), the odd ones by columns (row-parallel), every shard held by the
// ranks / group data-parallel replicas. kHsdp: each split by rows over `group` neighbouring ranks
// (a node's), replicated over ranks / group such groups. A chunk is 4 x 1,024 floats in each.
enum class Layout { kFsdp, kTpDp, kHsdp };

struct Chunk {
  std::vector<int64_t> offsets, sizes, global;
};

std::string tensor_key(int64_t tensor);

/// Rank `rank`'s chunk of tensor `tensor`.
Chunk chunk_of(Layout layout, int ranks, int group, int rank, int64_t tensor);

/// Rank `rank`'s local plan: one shard item per tensor, and the planner_data of every key.
dcpp::SavePlan local_plan(int ranks, int64_t tensors, Layout layout, int group, int rank);

/// Every rank's local plan.
std::vector<dcpp::SavePlan> local_plans(int ranks, int64_t tensors, Layout layout, int group);

/// Where the items of a final plan land: one data file per rank, items back to back.
std::vector<dcpp::WriteResult> write_results(const dcpp::SavePlan& final_plan);

/// The job's command-line options, the same in every coordinator benchmark.
struct JobOptions {
  std::vector<int> world_sizes;      // --ranks, smallest first
  int64_t tensors = 1000;            // --tensors
  std::string layout_name = "fsdp";  // --layout
  int group = 8;                     // --group
  std::filesystem::path dir;         // --dir, scratch
  Layout layout() const;
};

/// Adds --ranks, --tensors, --layout, --group and --dir to `app`, into `options` (whose values
/// are the defaults); world sizes from `min_ranks`.
void add_job_options(CLI::App& app, JobOptions& options, int min_ranks);

}  // namespace bench
