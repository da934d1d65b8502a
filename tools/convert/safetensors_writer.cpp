// Hugging Face safetensors, streamed: every offset follows from the dtypes and shapes the source
// knows up front, so each shard's header is written first and its tensors after it, one at a time.
// A shard is written to `<name>.partial` and renamed when complete; the index comes last.

#include "common/json_value.h"
#include "convert/destination.h"
#include "convert/format_writers.h"

#include "format/file_io.h"
#include "format/safetensors_header.h"

#include <dcpp/core/checkpoint_error.h>

#include <ATen/ATen.h>

#include <nlohmann/json.hpp>

#include <cstdio>

namespace dcpp::tools {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct Shard {
  std::vector<const SourceEntry*> tensors;
  uint64_t bytes = 0;
  fs::path path;
};

uint64_t output_bytes(const Conversion& conversion, const SourceEntry& entry) {
  uint64_t n = c10::elementSize(conversion.output_dtype(entry));
  for (int64_t size : entry.shape) n *= static_cast<uint64_t>(size);
  return n;
}

void write_shard(Conversion& conversion, const Shard& shard, const json& metadata) {
  std::vector<std::pair<std::string, std::string>> header_metadata;
  for (const auto& [key, value] : metadata.items()) {
    header_metadata.emplace_back(key, value.get<std::string>());
  }
  std::vector<detail::SafetensorsTensor> tensors;
  uint64_t offset = 0;
  for (const SourceEntry* entry : shard.tensors) {
    const uint64_t n = output_bytes(conversion, *entry);
    tensors.push_back(detail::SafetensorsTensor{entry->key, conversion.output_dtype(*entry),
                                                entry->shape, offset, offset + n});
    offset += n;
  }
  const std::string head = detail::encode_safetensors_header(tensors, header_metadata);
  const fs::path partial = shard.path.string() + ".partial";
  try {
    detail::File file(partial, detail::File::Mode::kCreateTruncate);
    detail::FileSink sink(file);
    sink.write(head.data(), head.size());
    for (const SourceEntry* entry : shard.tensors) {
      const at::Tensor data = conversion.read_tensor(*entry);
      sink.write(data.data_ptr(), static_cast<std::size_t>(data.numel() * data.element_size()));
    }
    sink.flush();
    file.sync();
    file.close();
    fs::rename(partial, shard.path);
  } catch (...) {
    std::error_code ignored;
    fs::remove(partial, ignored);
    throw;
  }
}

}  // namespace

std::vector<fs::path> write_safetensors(Conversion& conversion, const fs::path& dst,
                                        uint64_t max_shard_size) {
  if (fs::is_directory(dst)) {
    throw CheckpointError(ErrorKind::kUsage,
                          "destination " + dst.string() + " is a directory, not a file name");
  }
  CheckpointSource& source = conversion.source();
  json metadata = {{"format", "pt"}};
  std::vector<Shard> shards(1);
  for (const SourceEntry& entry : source.entries()) {
    if (!entry.is_tensor) {
      if (entry.key == "format") {
        throw CheckpointError(ErrorKind::kUsage,
                              "value 'format' would collide with safetensors' \"format\" metadata");
      }
      metadata[entry.key] = to_json(source.read_value(entry)).dump();
      continue;
    }
    if (!detail::safetensors_dtype_name(conversion.output_dtype(entry))) {
      throw CheckpointError(ErrorKind::kUsage, "tensor '" + entry.key + "' is " +
                                                   c10::toString(conversion.output_dtype(entry)) +
                                                   ", which safetensors cannot hold");
    }
    const uint64_t n = output_bytes(conversion, entry);
    if (max_shard_size > 0 && !shards.back().tensors.empty() &&
        shards.back().bytes + n > max_shard_size) {
      shards.emplace_back();
    }
    shards.back().tensors.push_back(&entry);
    shards.back().bytes += n;
  }

  std::string stem = dst.filename().string();
  const std::string suffix = ".safetensors";
  if (stem.size() > suffix.size() &&
      stem.compare(stem.size() - suffix.size(), suffix.size(), suffix) == 0) {
    stem.resize(stem.size() - suffix.size());
  }
  if (shards.size() == 1) {
    require_new_file(dst);
    shards[0].path = dst;
    write_shard(conversion, shards[0], metadata);
    return {dst};
  }
  const fs::path index = dst.parent_path() / (stem + ".safetensors.index.json");
  for (std::size_t i = 0; i < shards.size(); ++i) {
    char name[64];
    std::snprintf(name, sizeof(name), "-%05zu-of-%05zu.safetensors", i + 1, shards.size());
    shards[i].path = dst.parent_path() / (stem + name);
    require_new_file(shards[i].path);
  }
  require_new_file(index);
  std::vector<fs::path> written;
  json weight_map = json::object();
  uint64_t total = 0;
  for (std::size_t i = 0; i < shards.size(); ++i) {
    for (const SourceEntry* entry : shards[i].tensors) {
      weight_map[entry->key] = shards[i].path.filename().string();
    }
    total += shards[i].bytes;
    write_shard(conversion, shards[i], metadata);
    written.push_back(shards[i].path);
  }
  const std::string text =
      json{{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}}.dump(2) + "\n";
  detail::File file(index, detail::File::Mode::kCreateTruncate);
  file.write_all(text.data(), text.size());
  file.sync();
  file.close();
  written.push_back(index);
  return written;
}

}  // namespace dcpp::tools
