// A DCP checkpoint from any source, through dcpp's own `save` (its planner, file system writer and
// commit protocol), streamed: the state dict handed to `save` holds meta placeholders, and the
// planner reads each tensor from the source only when the writer asks for it (`resolve_data`),
// which the file system writer does one item at a time with one thread.

#include "destination.h"
#include "format_writers.h"

#include <dcpp/checkpoint/checkpointer.h>
#include <dcpp/core/checkpoint_error.h>

#include <algorithm>
#include <unordered_map>

namespace dcpp::tools {

namespace {

namespace fs = std::filesystem;

class StreamingSavePlanner final : public SavePlanner {
 public:
  explicit StreamingSavePlanner(Conversion& conversion)
      : conversion_(conversion), inner_(make_default_save_planner()) {
    for (const SourceEntry& entry : conversion.source().entries()) {
      if (entry.is_tensor) by_key_.emplace(join_path(entry.path), &entry);
    }
  }
  void set_up(StateDict& state_dict, bool is_coordinator) override {
    inner_->set_up(state_dict, is_coordinator);
  }
  SavePlan create_local_plan() override { return inner_->create_local_plan(); }
  std::pair<std::vector<SavePlan>, Metadata> create_global_plan(
      std::vector<SavePlan> plans) override {
    return inner_->create_global_plan(std::move(plans));
  }
  SavePlan finish_plan(SavePlan plan) override { return inner_->finish_plan(std::move(plan)); }
  WriteItemData resolve_data(const WriteItem& item) override {
    if (!item.is_tensor()) return inner_->resolve_data(item);
    auto found = by_key_.find(item.index.fqn);
    if (found == by_key_.end()) {
      throw CheckpointError(ErrorKind::kUsage, "the save plan names tensor '" + item.index.fqn +
                                                   "', which the source does not hold");
    }
    return conversion_.read_tensor(*found->second);
  }

 private:
  Conversion& conversion_;
  std::shared_ptr<SavePlanner> inner_;
  std::unordered_map<std::string, const SourceEntry*> by_key_;
};

}  // namespace

std::shared_ptr<SavePlanner> make_streaming_save_planner(Conversion& conversion) {
  return std::make_shared<StreamingSavePlanner>(conversion);
}

std::vector<fs::path> write_dcp(Conversion& conversion, const fs::path& dst,
                                std::optional<int> zstd_level) {
  require_new_directory(dst);
  StateDict state = conversion.placeholder_state_dict();
  SaveOptions options;
  options.planner = std::make_shared<StreamingSavePlanner>(conversion);
  options.file_system.thread_count = 1;
  options.file_system.single_file_per_rank = true;
  if (zstd_level) options.file_system.with_compression(Compression::kZstd, *zstd_level);
  const Metadata metadata = save(state, dst, options);
  std::vector<fs::path> files{dst / ".metadata"};
  for (const auto& [index, info] : metadata.storage_data) {
    const fs::path file = dst / info.relative_path;
    if (std::find(files.begin(), files.end(), file) == files.end()) files.push_back(file);
  }
  return files;
}

}  // namespace dcpp::tools
