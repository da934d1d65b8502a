#include "huggingface_layout.h"

#include "format/safetensors_header.h"

#include <dcpp/core/checkpoint_error.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <stdexcept>

namespace dcpp::detail {

namespace {

using nlohmann::json;

std::string file_name(int index, int count) {
  char name[64];
  std::snprintf(name, sizeof(name), "model-%05d-of-%05d.safetensors", index, count);
  return name;
}

}  // namespace

const HuggingFacePlacedTensor* HuggingFaceLayout::find(const std::string& fqn) const {
  auto found = by_fqn.find(fqn);
  return found == by_fqn.end() ? nullptr : &tensors[found->second];
}

HuggingFaceLayout compute_huggingface_layout(const std::vector<HuggingFaceTensorSpec>& tensors,
                                             const std::map<std::string, int>& fqn_to_index_mapping,
                                             uint64_t max_file_size) {
  HuggingFaceLayout layout;
  std::vector<int> file_of;  // per tensor, 0-based
  int file_count = 1;
  uint64_t in_file = 0;
  for (const HuggingFaceTensorSpec& spec : tensors) {
    if (!safetensors_dtype_name(spec.dtype)) {
      throw CheckpointError(
          ErrorKind::kUsage,
          "tensor '" + spec.fqn + "' is " + c10::toString(spec.dtype) +
              ", which safetensors cannot hold; cast it (or leave it out) to save "
              "in Hugging Face format");
    }
    const auto nbytes = safetensors_nbytes(spec.dtype, spec.shape);
    if (!nbytes) {
      throw CheckpointError(ErrorKind::kUsage,
                            "tensor '" + spec.fqn + "': its shape overflows 64-bit byte sizes");
    }
    if (!layout.by_fqn.emplace(spec.fqn, layout.tensors.size()).second) {
      throw CheckpointError(ErrorKind::kUsage,
                            "tensor '" + spec.fqn + "' is placed twice in the Hugging Face layout");
    }
    HuggingFacePlacedTensor placed;
    placed.spec = spec;
    placed.nbytes = *nbytes;
    layout.total_size += *nbytes;
    if (!fqn_to_index_mapping.empty()) {
      auto found = fqn_to_index_mapping.find(spec.fqn);
      if (found == fqn_to_index_mapping.end()) {
        throw CheckpointError(ErrorKind::kUsage,
                              "tensor '" + spec.fqn +
                                  "' is not in fqn_to_index_mapping; map every tensor saved to a "
                                  "file index (1 to N)");
      }
      if (found->second < 1 || found->second > 99999) {
        throw CheckpointError(ErrorKind::kUsage, "fqn_to_index_mapping maps '" + spec.fqn +
                                                     "' to " + std::to_string(found->second) +
                                                     "; file indices run from 1 to at most 99999");
      }
      file_of.push_back(found->second - 1);
      file_count = std::max(file_count, found->second);
    } else {
      if (max_file_size > 0 && in_file > 0 && in_file + *nbytes > max_file_size) {
        ++file_count;
        in_file = 0;
      }
      in_file += *nbytes;
      file_of.push_back(file_count - 1);
    }
    layout.tensors.push_back(std::move(placed));
  }
  if (file_count > 99999) {
    throw CheckpointError(ErrorKind::kUsage,
                          "the save needs " + std::to_string(file_count) +
                              " files, more than the 99999 Hugging Face names allow; raise the "
                              "maximum file size");
  }
  layout.files.resize(static_cast<std::size_t>(file_count));
  for (std::size_t i = 0; i < layout.tensors.size(); ++i) {
    layout.files[static_cast<std::size_t>(file_of[i])].tensors.push_back(i);
  }
  for (std::size_t f = 0; f < layout.files.size(); ++f) {
    HuggingFaceFile& file = layout.files[f];
    file.name = file_name(static_cast<int>(f) + 1, file_count);
    std::stable_sort(file.tensors.begin(), file.tensors.end(), [&](std::size_t a, std::size_t b) {
      return c10::elementSize(layout.tensors[a].spec.dtype) >
             c10::elementSize(layout.tensors[b].spec.dtype);
    });
    std::vector<SafetensorsTensor> entries;
    json sharding = json::object();
    uint64_t offset = 0;
    for (std::size_t i : file.tensors) {
      HuggingFacePlacedTensor& tensor = layout.tensors[i];
      tensor.file = f;
      entries.push_back(SafetensorsTensor{tensor.spec.fqn, tensor.spec.dtype, tensor.spec.shape,
                                          offset, offset + tensor.nbytes});
      sharding[tensor.spec.fqn] = {
          {"saved_offsets", std::vector<int64_t>(tensor.spec.shape.size(), 0)}};
      tensor.offset = offset;  // relative for now
      offset += tensor.nbytes;
    }
    file.header = encode_safetensors_header(
        entries,
        {{"DCP_SHARDING_INFO", sharding.dump()}, {"DCP_VERSION", "1.0"}, {"format", "pt"}});
    file.size = file.header.size() + offset;
    for (std::size_t i : file.tensors) {
      layout.tensors[i].offset += file.header.size();
    }
  }
  return layout;
}

std::string huggingface_staging_name(const std::string& name, const std::string& tag) {
  return "." + name + "." + tag + ".partial";
}

std::string encode_rank_layout(const HuggingFaceLayout& layout, const std::string& tag,
                               const std::vector<std::string>& fqns) {
  json files = json::array();
  json staging = json::array();
  for (const HuggingFaceFile& file : layout.files) {
    files.push_back(file.name);
    staging.push_back(huggingface_staging_name(file.name, tag));
  }
  json tensors = json::object();
  for (const std::string& fqn : fqns) {
    const HuggingFacePlacedTensor* tensor = layout.find(fqn);
    if (tensor == nullptr) {
      throw CheckpointError(ErrorKind::kUsage,
                            "tensor '" + fqn + "' has no place in the Hugging Face layout");
    }
    tensors[fqn] = {{"file", tensor->file},
                    {"offset", tensor->offset},
                    {"dtype", *safetensors_dtype_name(tensor->spec.dtype)},
                    {"shape", tensor->spec.shape}};
  }
  return json{{"files", files}, {"staging_files", staging}, {"tensors", tensors}}.dump();
}

HuggingFaceRankLayout decode_rank_layout(const std::string& text) {
  HuggingFaceRankLayout layout;
  try {
    const json j = json::parse(text);
    layout.files = j.at("files").get<std::vector<std::string>>();
    layout.staging_files = j.at("staging_files").get<std::vector<std::string>>();
    for (const auto& [fqn, entry] : j.at("tensors").items()) {
      HuggingFaceRankLayout::Tensor tensor;
      tensor.file = entry.at("file").get<std::size_t>();
      tensor.offset = entry.at("offset").get<uint64_t>();
      const auto dtype = dtype_from_safetensors_name(entry.at("dtype").get<std::string>());
      tensor.shape = entry.at("shape").get<std::vector<int64_t>>();
      if (!dtype || tensor.file >= layout.files.size()) throw std::out_of_range("bad tensor");
      tensor.dtype = *dtype;
      layout.tensors.emplace(fqn, std::move(tensor));
    }
    if (layout.files.size() != layout.staging_files.size()) throw std::out_of_range("files");
  } catch (const std::exception& error) {
    throw CheckpointError(ErrorKind::kUsage,
                          std::string("the Hugging Face save plan's layout is malformed (") +
                              error.what() +
                              "); prepare_global_plan of this writer was not applied");
  }
  return layout;
}

}  // namespace dcpp::detail
