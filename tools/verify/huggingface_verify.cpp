// `dcpp verify` of a Hugging Face directory. Safetensors files carry no checksums, so the checks
// are the format's: the index and every header as the library's reader checks them (names inside
// the directory, known dtypes, data ranges exactly each tensor's size inside its file, no overlap,
// chunks covering each tensor), then every tensor read in full, and no stray `*.safetensors` file
// beside an index that does not name it.

#include "verify/verify_command.h"

#include "convert/checkpoint_source.h"

#include <dcpp/checkpoint/checkpointer.h>
#include <dcpp/core/checkpoint_error.h>
#include <dcpp/storage/huggingface_storage.h>

#include <ATen/ATen.h>

#include <set>

namespace dcpp::tools {

namespace fs = std::filesystem;
using nlohmann::json;

json verify_huggingface_directory(const fs::path& directory) {
  json problems = json::array();
  const auto problem = [&](const json& file, const json& key, const std::string& message) {
    problems.push_back(json{{"file", file}, {"key", key}, {"problem", message}});
  };
  std::set<std::string> files;
  std::size_t entries = 0;
  std::size_t items = 0;
  uint64_t bytes_read = 0;  // of tensor data (the headers are not counted)
  try {
    auto reader = make_huggingface_reader(directory);
    const Metadata metadata = reader->read_metadata();
    entries = metadata.state_dict_metadata.size();
    items = metadata.storage_data.size();
    for (const auto& [index, info] : metadata.storage_data) files.insert(info.relative_path);
    // Every tensor read whole, one at a time, through a source that decodes the headers once.
    const std::unique_ptr<CheckpointSource> source = open_huggingface_source(directory);
    for (const SourceEntry& entry : source->entries()) {
      try {
        bytes_read += static_cast<uint64_t>(source->read_tensor(entry).nbytes());
      } catch (const c10::Error& error) {
        problem(nullptr, entry.key, error.what_without_backtrace());
      }
    }
  } catch (const c10::Error& error) {
    problem(nullptr, nullptr, error.what_without_backtrace());
  }
  if (fs::exists(directory / kHuggingFaceIndexFile) && !files.empty()) {
    std::error_code error;
    for (const auto& entry : fs::directory_iterator(directory, error)) {
      const std::string name = entry.path().filename().string();
      if (name.size() > 12 && name.front() != '.' &&
          name.compare(name.size() - 12, 12, ".safetensors") == 0 && files.count(name) == 0) {
        problem(name, nullptr,
                std::string("unreferenced: ") + kHuggingFaceIndexFile + " names no tensor in it");
      }
    }
  }
  return json{{"ok", problems.empty()},   {"checkpoint", directory.string()},
              {"format", "huggingface"},  {"entries", entries},
              {"items", items},           {"files", files.size()},
              {"bytes_read", bytes_read}, {"checksum_file", "absent"},
              {"problems", problems}};
}

}  // namespace dcpp::tools
