// Hugging Face safetensors as a CheckpointSource: one `.safetensors` file, or an `*.index.json`
// whose "weight_map" names the shard of every tensor. Headers are checked before anything is read:
// known dtypes, non-negative shapes, data ranges of exactly the tensor's size inside the file.
// Tensors are flat keys at the top level (paths of one element). Every `__metadata__` entry but
// safetensors' own "format" is a value under its key, as `dcpp convert --to safetensors` stores
// values: its text decoded as JSON, or the text itself when it is no JSON (another writer's
// note). Shards each carry the values; they are read from the first. The header codec is the
// library's ("format/safetensors_header.h").

#include "common/json_value.h"
#include "convert/checkpoint_source.h"

#include "format/file_io.h"
#include "format/safetensors_header.h"

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
    throw CheckpointError(ErrorKind::kCorrupt, what + " is not valid JSON: " + error.what());
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
    for (SourceEntry& entry : value_entries_) {
      if (seen_.count(entry.key) != 0) {
        throw CheckpointError(ErrorKind::kCorrupt,
                              "safetensors " + path.string() + ": '" + entry.key +
                                  "' is both a tensor and a __metadata__ value");
      }
      entries_.push_back(std::move(entry));
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
    auto found = values_.find(entry.key);
    if (found == values_.end()) {
      throw CheckpointError(ErrorKind::kUsage,
                            "safetensors entry '" + entry.key + "' is not a value");
    }
    return found->second.value;
  }

 private:
  void open_index(const fs::path& path) {
    detail::File file(path, detail::File::Mode::kRead);
    std::string text(file.size(), '\0');
    file.read_exactly(0, text.data(), text.size());
    const json index = parse_json(text, "safetensors index " + path.string());
    if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object()) {
      throw CheckpointError(ErrorKind::kCorrupt,
                            "safetensors index " + path.string() + " has no \"weight_map\" object");
    }
    std::map<std::string, std::set<std::string>> keys_by_file;
    for (const auto& [key, shard] : index["weight_map"].items()) {
      if (!shard.is_string()) {
        throw CheckpointError(ErrorKind::kCorrupt, "safetensors index " + path.string() +
                                                       ": the shard of '" + key +
                                                       "' is not a file name");
      }
      const std::string shard_name = shard.get<std::string>();
      const fs::path relative(shard_name);
      bool escapes = shard_name.empty() || relative.is_absolute();
      for (const fs::path& part : relative) escapes = escapes || part == "..";
      if (escapes) {
        throw CheckpointError(ErrorKind::kCorrupt, "safetensors index " + path.string() +
                                                       " names shard '" + shard_name +
                                                       "', which is not beside the index");
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
        throw CheckpointError(ErrorKind::kCorrupt,
                              where + ": the index places this tensor in another file");
      }
      if (!seen_.insert(tensor.name).second) {
        throw CheckpointError(ErrorKind::kCorrupt, where + ": the tensor appears in two files");
      }
      SourceEntry entry;
      entry.key = tensor.name;
      entry.path = ObjectPath{tensor.name};
      entry.is_tensor = true;
      entry.dtype = tensor.dtype;
      entry.shape = tensor.shape;
      entry.file = path.filename().string();
      located_[tensor.name] =
          Located{files_.size() - 1, header.data_start + tensor.begin, tensor.end - tensor.begin};
      entries_.push_back(std::move(entry));
    }
    if (expected != nullptr && header.tensors.size() != expected->size()) {
      throw CheckpointError(ErrorKind::kCorrupt, what + " lacks tensors the index places in it");
    }
    for (const auto& [key, text] : header.metadata) {
      if (key != "format") add_value(path, key, text);
    }
  }

  void add_value(const fs::path& file, const std::string& key, const std::string& text) {
    auto seen = values_.find(key);
    if (seen != values_.end()) {
      if (seen->second.text != text) {
        throw CheckpointError(
            ErrorKind::kCorrupt,
            "safetensors file " + file.string() + ", __metadata__ key '" + key +
                "': the value differs from the one in " + seen->second.file.string() +
                " (shards of different conversions?); convert the checkpoint again");
      }
      return;
    }
    c10::IValue value(text);
    const json parsed = json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (!parsed.is_discarded()) value = from_json(parsed);
    values_.emplace(key, StoredValue{file, text, std::move(value)});
    SourceEntry entry;
    entry.key = key;
    entry.path = ObjectPath{key};
    entry.file = file.filename().string();
    value_entries_.push_back(std::move(entry));
  }

  struct StoredValue {
    fs::path file;     // the first file that holds it
    std::string text;  // as __metadata__ holds it
    c10::IValue value;
  };

  std::vector<std::unique_ptr<detail::File>> files_;
  std::vector<SourceEntry> entries_;
  std::map<std::string, Located> located_;
  std::set<std::string> seen_;  // tensor names
  std::map<std::string, StoredValue> values_;
  std::vector<SourceEntry> value_entries_;  // appended to entries_ once every file is read
};

}  // namespace

std::unique_ptr<CheckpointSource> open_safetensors_source(const fs::path& path) {
  return std::make_unique<SafetensorsSource>(path);
}

}  // namespace dcpp::tools
