// A job of R ranks as its coordinator sees it (simulated_job.h).

#include "simulated_job.h"

namespace bench {

std::string tensor_key(int64_t tensor) {
  return "model.layers." + std::to_string(tensor / 8) + ".weight" + std::to_string(tensor % 8);
}

Chunk chunk_of(Layout layout, int ranks, int group, int rank, int64_t tensor) {
  if (layout == Layout::kFsdp) {
    return {{rank * kRowsPerRank, 0}, {kRowsPerRank, kColumns}, {ranks * kRowsPerRank, kColumns}};
  }
  const int64_t shard = rank % group;
  if (layout == Layout::kTpDp && tensor % 2 == 1) {
    return {{0, shard * kColumns}, {kRowsPerRank, kColumns}, {kRowsPerRank, group * kColumns}};
  }
  return {{shard * kRowsPerRank, 0}, {kRowsPerRank, kColumns}, {group * kRowsPerRank, kColumns}};
}

dcpp::SavePlan local_plan(int ranks, int64_t tensors, Layout layout, int group, int rank) {
  dcpp::SavePlan plan;
  plan.items.reserve(static_cast<std::size_t>(tensors));
  for (int64_t t = 0; t < tensors; ++t) {
    const Chunk chunk = chunk_of(layout, ranks, group, rank, t);
    const std::vector<int64_t>& offsets = chunk.offsets;
    dcpp::WriteItem item;
    item.index = dcpp::MetadataIndex{tensor_key(t), offsets, std::nullopt};
    item.type = dcpp::WriteItemType::kShard;
    item.tensor_data = dcpp::TensorWriteData{dcpp::ChunkStorageMetadata{offsets, chunk.sizes},
                                             dcpp::TensorProperties{}, chunk.global};
    plan.items.push_back(std::move(item));
    plan.planner_data.emplace_back(tensor_key(t), dcpp::ObjectPath{tensor_key(t)});
  }
  return plan;
}

std::vector<dcpp::SavePlan> local_plans(int ranks, int64_t tensors, Layout layout, int group) {
  std::vector<dcpp::SavePlan> plans;
  plans.reserve(static_cast<std::size_t>(ranks));
  for (int rank = 0; rank < ranks; ++rank) {
    plans.push_back(local_plan(ranks, tensors, layout, group, rank));
  }
  return plans;
}

std::vector<dcpp::WriteResult> write_results(const dcpp::SavePlan& final_plan) {
  std::vector<dcpp::WriteResult> results;
  results.reserve(final_plan.items.size());
  const std::string file = final_plan.storage_data + "0.distcp";
  int64_t offset = 0;
  for (const dcpp::WriteItem& item : final_plan.items) {
    const int64_t bytes = item.tensor_storage_size();
    results.push_back({item.index, bytes, {file, offset, bytes, {}}, 0u, std::nullopt});
    offset += bytes;
  }
  return results;
}

Layout JobOptions::layout() const {
  return layout_name == "tpdp"   ? Layout::kTpDp
         : layout_name == "hsdp" ? Layout::kHsdp
                                 : Layout::kFsdp;
}

void add_job_options(CLI::App& app, JobOptions& options, int min_ranks) {
  app.add_option("--ranks", options.world_sizes, "world sizes, smallest first")
      ->delimiter(',')
      ->check(CLI::Range(min_ranks, 1 << 16));
  app.add_option("--tensors", options.tensors, "tensors in the model")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 24));
  app.add_option("--dir", options.dir, "scratch directory (removed after each world size)");
  app.add_option("--layout", options.layout_name,
                 "fsdp (each tensor split by rows over every rank), tpdp (tensor parallel x data "
                 "parallel) or hsdp (sharded within groups, replicated across them)")
      ->check(CLI::IsMember({"fsdp", "tpdp", "hsdp"}));
  app.add_option("--group", options.group, "tpdp's tensor-parallel size, hsdp's shard group size")
      ->check(CLI::Range(1, 1 << 16));
}

}  // namespace bench
