// Fuzz target: a `.metadata` file, through everything a load does with it before it opens a data
// file:
//   - the file system reader's read_metadata (the restricted unpickler, decode_metadata, the
//     relative path of every storage entry) and set_up (paths again, stream transforms);
//   - `dcpp verify`'s chunk coverage check of every tensor;
//   - load_from_keys's planning (`dcpp convert`, `dcpp inspect`): the empty-state-dict planner
//     rebuilds the nested state dict along planner_data, allocates every tensor at its global
//     shape and intersects it with the saved chunks.
// The planner allocates what `.metadata` claims, as DCP does; here it is given only the keys whose
// tensors have at most 65536 elements, so that an input cannot ask for gigabytes.
//
// Contract checked: any bytes either pass or throw CheckpointError.

#include "common/chunk_coverage.h"

#include <dcpp/core/checkpoint_error.h>
#include <dcpp/planner/load_planner.h>
#include <dcpp/storage/filesystem_reader.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <unistd.h>

namespace {

namespace fs = std::filesystem;

constexpr int64_t kMaxElements = int64_t{1} << 16;

/// A checkpoint directory of this process, removed at exit, whose `.metadata` each input replaces:
/// in /dev/shm where there is one (ext4 flushes a file rewritten in place when it is closed).
class ScratchCheckpoint {
 public:
  ScratchCheckpoint() {
    std::error_code error;
    const fs::path parent =
        fs::is_directory("/dev/shm", error) ? fs::path("/dev/shm") : fs::temp_directory_path();
    std::string pattern = (parent / "dcpp-metadata-fuzzer-XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) {
      std::perror("metadata_fuzzer: mkdtemp");
      std::abort();
    }
    directory_ = pattern;
  }
  ~ScratchCheckpoint() {
    std::error_code ignored;
    fs::remove_all(directory_, ignored);
  }
  const fs::path& directory() const { return directory_; }

  void write_metadata(const uint8_t* data, std::size_t size) const {
    std::FILE* file = std::fopen((directory_ / ".metadata").c_str(), "wb");
    if (file == nullptr || std::fwrite(data, 1, size, file) != size || std::fclose(file) != 0) {
      std::perror("metadata_fuzzer: writing .metadata");
      std::abort();
    }
  }

 private:
  fs::path directory_;
};

bool is_small(const dcpp::StorageMetadata& storage) {
  const auto* tensor = std::get_if<dcpp::TensorStorageMetadata>(&storage);
  if (tensor == nullptr) return true;
  int64_t numel = 1;
  for (int64_t size : tensor->size) {
    if (size > kMaxElements || (numel *= size) > kMaxElements) return false;
  }
  return true;
}

/// The flat keys the planner may load: those of values and small tensors, less any key that would
/// also select a large tensor through its object path (the planner selects by path prefix).
std::vector<std::string> small_keys(const dcpp::Metadata& metadata) {
  std::unordered_map<std::string, const dcpp::ObjectPath*> paths;
  for (const auto& [key, path] : metadata.planner_data) paths.emplace(key, &path);
  std::unordered_set<std::string> keys;
  std::unordered_set<std::string> selecting_large;
  for (const auto& [key, storage] : metadata.state_dict_metadata) {
    if (is_small(storage)) {
      keys.insert(key);
      continue;
    }
    selecting_large.insert(key);
    if (auto found = paths.find(key); found != paths.end()) {
      dcpp::ObjectPath prefix;
      for (const dcpp::PathElement& step : *found->second) {
        prefix.push_back(step);
        selecting_large.insert(dcpp::join_path(prefix));
      }
    }
  }
  std::vector<std::string> selected;
  for (const std::string& key : keys) {
    if (selecting_large.count(key) == 0) selected.push_back(key);
  }
  return selected;
}

void plan_load(const dcpp::Metadata& metadata) {
  const std::vector<std::string> keys = small_keys(metadata);
  if (keys.empty()) return;  // no keys would mean all keys
  dcpp::StateDict state_dict;
  const std::shared_ptr<dcpp::LoadPlanner> planner = dcpp::make_empty_state_dict_load_planner(keys);
  planner->set_up(state_dict, metadata, /*is_coordinator=*/true);
  planner->finish_plan(planner->create_global_plan({planner->create_local_plan()}).front());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  static const ScratchCheckpoint checkpoint;
  checkpoint.write_metadata(data, size);
  try {
    const auto reader = std::make_unique<dcpp::FileSystemReader>(checkpoint.directory());
    const dcpp::Metadata metadata = reader->read_metadata();
    reader->set_up(metadata, /*rank=*/0, /*is_coordinator=*/true);
    for (const auto& [key, storage] : metadata.state_dict_metadata) {
      if (const auto* tensor = std::get_if<dcpp::TensorStorageMetadata>(&storage)) {
        dcpp::tools::chunk_coverage_problems(tensor->size, tensor->chunks);
      }
    }
    plan_load(metadata);
  } catch (const dcpp::CheckpointError&) {
  }
  return 0;
}
