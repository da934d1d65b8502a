// Building DCP Metadata from a Hugging Face directory, as HuggingFaceStorageReader.read_metadata
// does (hf_storage.py): every file's tensors are chunks, at the offsets the file's
// "DCP_SHARDING_INFO" gives (zeros without it), and a tensor's global size is the largest
// offset + shape over its chunks. Unlike Python, everything is checked first: the index's file
// names stay inside the directory, the index and the headers agree, and the chunks of a tensor
// neither overlap nor leave a hole.

#include "huggingface_directory.h"

#include "format/file_io.h"
#include "format/safetensors_header.h"
#include "state_dict/box.h"

#include <dcpp/core/checkpoint_error.h>
#include <dcpp/storage/huggingface_storage.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <limits>
#include <optional>
#include <regex>
#include <set>

namespace dcpp::detail {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kShardingInfoKey = "DCP_SHARDING_INFO";
constexpr const char* kSuffix = ".safetensors";
constexpr uint64_t kMaxIndexSize = 100'000'000;

bool ends_with(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string read_whole(const fs::path& path, uint64_t limit, const std::string& what) {
  File file(path, File::Mode::kRead);
  const uint64_t size = file.size();
  if (size > limit) {
    throw CheckpointError(ErrorKind::kCorrupt,
                          what + " is " + std::to_string(size) + " bytes, more than the " +
                              std::to_string(limit) + "-byte limit; it is not an index");
  }
  std::string bytes(size, '\0');
  file.read_exactly(0, bytes.data(), bytes.size());
  return bytes;
}

// weight_map: FQN -> file name, checked to name a file inside the directory.
std::map<std::string, std::string> read_index(const fs::path& directory) {
  const fs::path path = directory / kHuggingFaceIndexFile;
  const std::string what = "Hugging Face index " + path.string();
  const std::string text = read_whole(path, kMaxIndexSize, what);
  json index;
  try {
    index = json::parse(text);
  } catch (const json::exception& error) {
    throw CheckpointError(ErrorKind::kCorrupt,
                          what + " is not valid JSON (" + error.what() +
                              "); the index is damaged, restore it or remove it to read every "
                              "*.safetensors file");
  }
  if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object()) {
    throw CheckpointError(ErrorKind::kCorrupt,
                          what + " has no \"weight_map\" object; the index is malformed");
  }
  std::map<std::string, std::string> weight_map;
  for (const auto& [key, file] : index["weight_map"].items()) {
    if (!file.is_string()) {
      throw CheckpointError(ErrorKind::kCorrupt,
                            what + ", key '" + key + "': its file is not a string");
    }
    const std::string name = file.get<std::string>();
    const fs::path relative(name);
    bool escapes = name.empty() || relative.is_absolute() || name.find('\0') != std::string::npos;
    for (const fs::path& part : relative) {
      escapes = escapes || part == ".." || part == "." || part.empty();
    }
    if (escapes) {
      throw CheckpointError(
          ErrorKind::kCorrupt,
          what + ", key '" + key + "': file '" + name +
              "' is not inside the checkpoint directory; refusing to read it (the "
              "index is malformed or hostile)");
    }
    if (!fs::is_regular_file(directory / relative)) {
      throw CheckpointError(ErrorKind::kNotFound,
                            what + ", key '" + key + "': file '" + name +
                                "' does not exist; the checkpoint is incomplete (download or copy "
                                "the missing file)");
    }
    weight_map.emplace(key, name);
  }
  return weight_map;
}

// Without an index: every *.safetensors file at the top level, by name. A consolidated save that
// did not finish may have renamed some of its `model-0000i-of-0000N` files but not written the
// index: such a set must be complete.
std::vector<std::string> list_files(const fs::path& directory) {
  std::vector<std::string> files;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(directory, error)) {
    const std::string name = entry.path().filename().string();
    if (ends_with(name, kSuffix) && name.front() != '.' && entry.is_regular_file()) {
      files.push_back(name);
    }
  }
  if (error) {
    throw CheckpointError(ErrorKind::kIo, "cannot list Hugging Face checkpoint directory " +
                                              directory.string() + ": " + error.message());
  }
  std::sort(files.begin(), files.end());
  static const std::regex numbered("model-([0-9]{5})-of-([0-9]{5})\\.safetensors");
  std::map<int, std::set<int>> parts;  // N -> the i present
  for (const std::string& name : files) {
    std::smatch match;
    if (std::regex_match(name, match, numbered)) {
      parts[std::stoi(match[2])].insert(std::stoi(match[1]));
    }
  }
  for (const auto& [count, present] : parts) {
    for (int i = 1; i <= count; ++i) {
      if (present.count(i) == 0) {
        char missing[64];
        std::snprintf(missing, sizeof(missing), "model-%05d-of-%05d.safetensors", i, count);
        throw CheckpointError(ErrorKind::kNotFound,
                              "Hugging Face checkpoint " + directory.string() + " has no " +
                                  kHuggingFaceIndexFile + " and lacks " + missing +
                                  ": it is incomplete (a save that did not finish, or a partial "
                                  "copy); load another checkpoint");
      }
    }
  }
  return files;
}

// DCP_SHARDING_INFO: FQN -> "saved_offsets", or nullopt when the file has none.
std::optional<std::map<std::string, std::vector<int64_t>>> sharding_info(
    const SafetensorsHeader& header, const std::string& where) {
  const std::string* text = header.find_metadata(kShardingInfoKey);
  if (text == nullptr) return std::nullopt;
  json info;
  try {
    info = json::parse(*text);
  } catch (const json::exception& error) {
    throw CheckpointError(ErrorKind::kCorrupt, where + ": __metadata__ " + kShardingInfoKey +
                                                   " is not valid JSON (" + error.what() + ")");
  }
  if (!info.is_object()) {
    throw CheckpointError(ErrorKind::kCorrupt,
                          where + ": __metadata__ " + kShardingInfoKey + " is not an object");
  }
  std::map<std::string, std::vector<int64_t>> offsets;
  for (const auto& [key, entry] : info.items()) {
    if (!entry.is_object() || !entry.contains("saved_offsets") ||
        !entry["saved_offsets"].is_array()) {
      throw CheckpointError(
          ErrorKind::kCorrupt,
          where + ", key '" + key + "': " + kShardingInfoKey + " has no \"saved_offsets\" list");
    }
    std::vector<int64_t> values;
    for (const json& value : entry["saved_offsets"]) {
      if (!value.is_number_unsigned() ||
          value.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        throw CheckpointError(ErrorKind::kCorrupt,
                              where + ", key '" + key + "': " + kShardingInfoKey +
                                  " saved_offsets hold a value that is not a non-negative integer");
      }
      values.push_back(value.get<int64_t>());
    }
    offsets.emplace(key, std::move(values));
  }
  return offsets;
}

SafetensorsHeader read_header(const File& file, const std::string& where) {
  const uint64_t file_size = file.size();
  std::string first(8, '\0');
  if (file_size >= 8) file.read_exactly(0, first.data(), 8);
  const uint64_t length = decode_safetensors_header_length(first, file_size, where);
  std::string text(length, '\0');
  file.read_exactly(8, text.data(), text.size());
  return parse_safetensors_header(text, file_size - 8 - length, where);
}

struct Chunk {
  std::vector<int64_t> offsets;
  HuggingFaceChunk storage;
  uint64_t length = 0;
};

// Checks a tensor's chunks (same dtype and rank, within int64, no overlap, no hole) and returns
// its metadata.
TensorStorageMetadata tensor_metadata(const std::string& key, const std::vector<Chunk>& chunks,
                                      const std::vector<std::string>& files,
                                      const fs::path& directory) {
  const auto where = [&](const Chunk& chunk) {
    return "safetensors file " + (directory / files[chunk.storage.file]).string() + ", key '" +
           key + "'";
  };
  TensorStorageMetadata tensor;
  tensor.properties.dtype = chunks.front().storage.dtype;
  const std::size_t dims = chunks.front().storage.shape.size();
  tensor.size.assign(dims, 0);
  for (const Chunk& chunk : chunks) {
    if (chunk.storage.dtype != tensor.properties.dtype || chunk.storage.shape.size() != dims) {
      throw CheckpointError(ErrorKind::kCorrupt,
                            where(chunk) + ": this chunk is " + c10::toString(chunk.storage.dtype) +
                                " of " + std::to_string(chunk.storage.shape.size()) +
                                " dimensions, unlike another chunk of the tensor; the files do not "
                                "belong to one checkpoint");
    }
    for (std::size_t d = 0; d < dims; ++d) {
      if (chunk.offsets[d] > std::numeric_limits<int64_t>::max() - chunk.storage.shape[d]) {
        throw CheckpointError(ErrorKind::kCorrupt,
                              where(chunk) + ": saved_offsets + shape overflow");
      }
      tensor.size[d] = std::max(tensor.size[d], chunk.offsets[d] + chunk.storage.shape[d]);
    }
    tensor.chunks.push_back(ChunkStorageMetadata{chunk.offsets, chunk.storage.shape});
  }
  unsigned __int128 covered = 0;
  // Saturating: a hostile offset may announce a size no chunks can cover.
  const unsigned __int128 too_large = static_cast<unsigned __int128>(1) << 100;
  unsigned __int128 total = 1;
  for (int64_t size : tensor.size) {
    total = size != 0 && total > too_large / static_cast<uint64_t>(size)
                ? too_large
                : total * static_cast<uint64_t>(size);
  }
  for (const Chunk& chunk : chunks) {
    unsigned __int128 volume = 1;
    for (int64_t size : chunk.storage.shape) volume *= static_cast<uint64_t>(size);
    covered += volume;
  }
  std::vector<BoxView> boxes;
  for (const Chunk& chunk : chunks) boxes.push_back(BoxView{chunk.offsets, chunk.storage.shape});
  if (const auto pair = first_overlap(boxes)) {
    throw CheckpointError(ErrorKind::kCorrupt,
                          where(chunks[pair->second]) + ": this chunk overlaps the chunk in " +
                              (directory / files[chunks[pair->first].storage.file]).string() +
                              "; the files do not belong to one checkpoint");
  }
  if (covered != total) {
    throw CheckpointError(ErrorKind::kNotFound,
                          "Hugging Face checkpoint " + directory.string() + ", key '" + key +
                              "': its chunks cover only part of its global shape; a file of the "
                              "checkpoint is missing");
  }
  return tensor;
}

}  // namespace

HuggingFaceDirectory scan_huggingface_directory(const fs::path& directory) {
  if (!fs::is_directory(directory)) {
    throw CheckpointError(ErrorKind::kNotFound, "no Hugging Face checkpoint at " +
                                                    directory.string() + ": not a directory");
  }
  HuggingFaceDirectory result;
  result.directory = directory;
  std::optional<std::map<std::string, std::string>> weight_map;
  if (fs::exists(directory / kHuggingFaceIndexFile)) {
    weight_map = read_index(directory);
    std::set<std::string> names;
    for (const auto& [key, file] : *weight_map) names.insert(file);
    result.files.assign(names.begin(), names.end());
  } else {
    result.files = list_files(directory);
  }
  if (result.files.empty()) {
    throw CheckpointError(ErrorKind::kNotFound,
                          "no Hugging Face checkpoint at " + directory.string() +
                              ": it has no *.safetensors file" +
                              (weight_map ? std::string(" named by its index") : std::string()));
  }
  std::vector<std::string> order;  // keys, first seen first
  std::map<std::string, std::vector<Chunk>> by_key;
  std::set<std::string> placed;  // index keys found in the file the index names
  for (std::size_t f = 0; f < result.files.size(); ++f) {
    const fs::path path = directory / result.files[f];
    const std::string where = "safetensors file " + path.string();
    const File file(path, File::Mode::kRead);
    const SafetensorsHeader header = read_header(file, where);
    const auto sharding = sharding_info(header, where);
    for (const SafetensorsTensor& tensor : header.tensors) {
      const std::string at_key = where + ", key '" + tensor.name + "'";
      if (weight_map) {
        auto listed = weight_map->find(tensor.name);
        if (listed == weight_map->end()) {
          throw CheckpointError(ErrorKind::kCorrupt,
                                at_key + ": the index " + kHuggingFaceIndexFile +
                                    " does not list this tensor; the index and the files disagree");
        }
        if (listed->second == result.files[f]) {
          placed.insert(tensor.name);
        } else if (!sharding) {
          throw CheckpointError(ErrorKind::kCorrupt,
                                at_key + ": the index places this tensor in '" + listed->second +
                                    "'; the index and the files disagree");
        }
      }
      Chunk chunk;
      chunk.offsets.assign(tensor.shape.size(), 0);
      if (sharding) {
        auto found = sharding->find(tensor.name);
        if (found == sharding->end()) {
          throw CheckpointError(ErrorKind::kCorrupt, at_key + ": the file's " + kShardingInfoKey +
                                                         " has no saved_offsets for it");
        }
        if (found->second.size() != tensor.shape.size()) {
          throw CheckpointError(ErrorKind::kCorrupt, at_key + ": " + kShardingInfoKey + " gives " +
                                                         std::to_string(found->second.size()) +
                                                         " offsets for a tensor of " +
                                                         std::to_string(tensor.shape.size()) +
                                                         " dimensions");
        }
        chunk.offsets = found->second;
      }
      chunk.storage =
          HuggingFaceChunk{f, header.data_start + tensor.begin, tensor.dtype, tensor.shape};
      chunk.length = tensor.end - tensor.begin;
      auto [slot, inserted] = by_key.try_emplace(tensor.name);
      if (inserted) order.push_back(tensor.name);
      for (const Chunk& other : slot->second) {
        if (other.offsets == chunk.offsets) {
          throw CheckpointError(ErrorKind::kCorrupt,
                                at_key + ": " +
                                    (directory / result.files[other.storage.file]).string() +
                                    " holds this tensor at the same offsets too; the files do not "
                                    "belong to one checkpoint");
        }
      }
      slot->second.push_back(std::move(chunk));
    }
  }
  if (weight_map) {
    for (const auto& [key, file] : *weight_map) {
      if (placed.count(key) == 0) {
        throw CheckpointError(ErrorKind::kCorrupt,
                              "Hugging Face index " + (directory / kHuggingFaceIndexFile).string() +
                                  ", key '" + key + "': file '" + file +
                                  "' does not hold this tensor; the index and the files disagree");
      }
    }
  }
  for (const std::string& key : order) {
    const std::vector<Chunk>& chunks = by_key.at(key);
    result.metadata.state_dict_metadata.emplace_back(
        key, tensor_metadata(key, chunks, result.files, directory));
    for (std::size_t i = 0; i < chunks.size(); ++i) {
      MetadataIndex index{key, chunks[i].offsets, static_cast<int64_t>(i)};
      result.metadata.storage_data.emplace_back(
          index, StorageInfo{result.files[chunks[i].storage.file],
                             static_cast<int64_t>(chunks[i].storage.data_offset),
                             static_cast<int64_t>(chunks[i].length),
                             {}});
      result.chunks.emplace(std::move(index), chunks[i].storage);
    }
  }
  return result;
}

}  // namespace dcpp::detail
