// Hugging Face safetensors as a CheckpointSource: one `.safetensors` file, or an `*.index.json`
// whose "weight_map" names the shard of every tensor. Headers are checked before anything is read:
// known dtypes, non-negative shapes, data ranges of exactly the tensor's size inside the file.
// Tensors are flat keys at the top level (paths of one element); `__metadata__` is not read. The
// header codec is the library's (checkpoint/src/safetensors_header.h).

#include "checkpoint_source.h"
#include "file_io.h"
#include "safetensors_header.h"

#include <dcpp/core/checkpoint_error.h>

#include <ATen/ATen.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <map>
#include <set>

namespace dcpp::tools {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct Located {
  std::size_t file;  // index into files_
  uint64_t offset;   // absolute, in the file
  uint64_t nbytes;
};

json parse_json(const std::string& text, const std::string& what) {
  try {
    return json::parse(text);
  } catch (const json::exception& error) {
    throw CheckpointError(what + " is not valid JSON: " + error.what());
  }
}

class SafetensorsSource final : public CheckpointSource {
 public:
  explicit SafetensorsSource(const fs::path& path) {
    const std::string name = path.filename().string();
    if (name.size() > 11 && name.compare(name.size() - 11, 11, ".index.json") == 0) {
      open_index(path);
    } else {
      open_file(path, nullptr);
    }
  }

  std::string format() const override { return "safetensors"; }
  const std::vector<SourceEntry>& entries() const override { return entries_; }

  at::Tensor read_tensor(const SourceEntry& entry) override {
    const Located& where = located_.at(entry.key);
    at::Tensor tensor = at::empty(entry.shape, at::TensorOptions().dtype(entry.dtype));
    files_[where.file]->read_exactly(where.offset, tensor.data_ptr(), where.nbytes);
    return tensor;
  }

  c10::IValue read_value(const SourceEntry& entry) override {
    throw CheckpointError("safetensors entry '" + entry.key + "' is not a value");
  }

 private:
  void open_index(const fs::path& path) {
    detail::File file(path, detail::File::Mode::kRead);
    std::string text(file.size(), '\0');
    file.read_exactly(0, text.data(), text.size());
    const json index = parse_json(text, "safetensors index " + path.string());
    if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object()) {
      throw CheckpointError("safetensors index " + path.string() + " has no \"weight_map\" object");
    }
    std::map<std::string, std::set<std::string>> keys_by_file;
    for (const auto& [key, shard] : index["weight_map"].items()) {
      if (!shard.is_string()) {
        throw CheckpointError("safetensors index " + path.string() + ": the shard of '" + key +
                              "' is not a file name");
      }
      const std::string shard_name = shard.get<std::string>();
      const fs::path relative(shard_name);
      bool escapes = shard_name.empty() || relative.is_absolute();
      for (const fs::path& part : relative) escapes = escapes || part == "..";
      if (escapes) {
        throw CheckpointError("safetensors index " + path.string() + " names shard '" +
                              shard_name + "', which is not beside the index");
      }
      keys_by_file[shard_name].insert(key);
    }
    for (const auto& [shard, keys] : keys_by_file) {
      open_file(path.parent_path() / shard, &keys);
    }
  }

  // Reads one file's header (checked by the library's codec); with `expected`, the file must
  // hold exactly those tensors.
  void open_file(const fs::path& path, const std::set<std::string>* expected) {
    const std::string what = "safetensors file " + path.string();
    files_.push_back(std::make_unique<detail::File>(path, detail::File::Mode::kRead));
    const detail::File& file = *files_.back();
    const uint64_t file_size = file.size();
    std::string first(8, '\0');
    if (file_size >= 8) file.read_exactly(0, first.data(), 8);
    const uint64_t header_size = detail::decode_safetensors_header_length(first, file_size, what);
    std::string text(header_size, '\0');
    file.read_exactly(8, text.data(), text.size());
    const detail::SafetensorsHeader header =
        detail::parse_safetensors_header(text, file_size - 8 - header_size, what);
    for (const detail::SafetensorsTensor& tensor : header.tensors) {
      const std::string where = what + ", key '" + tensor.name + "'";
      if (expected != nullptr && expected->count(tensor.name) == 0) {
        throw CheckpointError(where + ": the index places this tensor in another file");
      }
      if (!seen_.insert(tensor.name).second) {
        throw CheckpointError(where + ": the tensor appears in two files");
      }
      SourceEntry entry;
      entry.key = tensor.name;
      entry.path = ObjectPath{tensor.name};
      entry.is_tensor = true;
      entry.dtype = tensor.dtype;
      entry.shape = tensor.shape;
      located_[tensor.name] =
          Located{files_.size() - 1, header.data_start + tensor.begin, tensor.end - tensor.begin};
      entries_.push_back(std::move(entry));
    }
    if (expected != nullptr && header.tensors.size() != expected->size()) {
      throw CheckpointError(what + " lacks tensors the index places in it");
    }
  }

  std::vector<std::unique_ptr<detail::File>> files_;
  std::vector<SourceEntry> entries_;
  std::map<std::string, Located> located_;
  std::set<std::string> seen_;
};

}  // namespace

std::unique_ptr<CheckpointSource> open_safetensors_source(const fs::path& path) {
  return std::make_unique<SafetensorsSource>(path);
}

}  // namespace dcpp::tools
