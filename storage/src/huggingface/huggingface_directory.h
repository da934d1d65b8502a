#pragma once
// What a Hugging Face checkpoint directory holds, from its index and safetensors headers alone:
// the DCP Metadata HuggingFaceStorageReader builds, and where each saved chunk's bytes lie.

#include <dcpp/format/metadata.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace dcpp::detail {

/// One tensor of one safetensors file: a chunk of the checkpoint's tensor.
struct HuggingFaceChunk {
  std::size_t file = 0;      // index into HuggingFaceDirectory::files
  uint64_t data_offset = 0;  // absolute offset of the tensor's first byte in the file
  at::ScalarType dtype = at::kFloat;
  std::vector<int64_t> shape;  // the chunk's sizes, as stored (row-major)
};

struct HuggingFaceDirectory {
  std::filesystem::path directory;
  std::vector<std::string> files;  // relative to `directory`
  Metadata metadata;
  std::map<MetadataIndex, HuggingFaceChunk> chunks;
};

/// Reads the index (if any) and every file's header, and checks them all (huggingface_storage.h
/// says what). Throws CheckpointError naming the directory or file and the key.
HuggingFaceDirectory scan_huggingface_directory(const std::filesystem::path& directory);

}  // namespace dcpp::detail
