// A DCP checkpoint from any source, through dcpp's own `save` (its planner, file system writer and
// commit protocol), streamed: the state dict handed to `save` holds meta placeholders, and the
// planner reads each tensor from the source only when the writer asks for it (`lookup_object`),
// which the file system writer does one item at a time with one thread.

#include "convert/destination.h"
#include "convert/format_writers.h"

#include <dcpp/checkpoint/checkpointer.h>
#include <dcpp/core/checkpoint_error.h>
#include <dcpp/storage/s3_storage.h>

#include <algorithm>
#include <unordered_map>

namespace dcpp::tools {

namespace {

namespace fs = std::filesystem;

// DCP's default planning over the conversion's placeholder state dict; a tensor's data is read
// from the source only when the writer asks for it.
class StreamingSavePlanner final : public DefaultSavePlanner {
 public:
  explicit StreamingSavePlanner(Conversion& conversion) : conversion_(conversion) {
    for (const SourceEntry& entry : conversion.source().entries()) {
      if (entry.is_tensor) by_key_.emplace(join_path(entry.path), &entry);
    }
  }

 protected:
  WriteItemData lookup_object(const MetadataIndex& index) override {
    if (!index.offset) return DefaultSavePlanner::lookup_object(index);  // a value, not a tensor
    auto found = by_key_.find(index.fqn);
    if (found == by_key_.end()) {
      throw CheckpointError(ErrorKind::kUsage, "the save plan names tensor '" + index.fqn +
                                                   "', which the source does not hold");
    }
    return conversion_.read_tensor(*found->second);
  }

 private:
  Conversion& conversion_;
  std::unordered_map<std::string, const SourceEntry*> by_key_;
};

}  // namespace

std::shared_ptr<SavePlanner> make_streaming_save_planner(Conversion& conversion) {
  return std::make_shared<StreamingSavePlanner>(conversion);
}

std::vector<fs::path> write_dcp(Conversion& conversion, const fs::path& dst,
                                std::optional<int> zstd_level) {
  if (Location(dst).is_directory()) require_new_directory(dst);  // a store's writer refuses itself
  StateDict state = conversion.placeholder_state_dict();
  SaveOptions options;
  options.planner = std::make_shared<StreamingSavePlanner>(conversion);
  options.file_system.thread_count = 1;
  options.file_system.single_file_per_rank = true;
  if (zstd_level) options.file_system.with_compression(Compression::kZstd, *zstd_level);
  const Metadata metadata = save(state, dst, options);
  std::vector<fs::path> files{dst / ".metadata"};
  for (fs::path& file : data_files_of(dst, metadata)) files.push_back(std::move(file));
  return files;
}

std::vector<fs::path> data_files_of(const fs::path& dst, const Metadata& metadata) {
  std::vector<fs::path> files;
  for (const auto& [index, info] : metadata.storage_data) files.push_back(dst / info.relative_path);
  std::sort(files.begin(), files.end());
  files.erase(std::unique(files.begin(), files.end()), files.end());
  return files;
}

}  // namespace dcpp::tools
