#pragma once
// Where every tensor of a Hugging Face save goes, computed once by the coordinator from every
// rank's plan: which file, the file's header bytes and size, and each tensor's byte offset. Ranks
// get the part they need as a small JSON text in SavePlan::storage_data. Pure computation.

#include <c10/core/ScalarType.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace dcpp::detail {

/// A tensor to place: its FQN, dtype and global shape.
struct HuggingFaceTensorSpec {
  std::string fqn;
  at::ScalarType dtype = at::kFloat;
  std::vector<int64_t> shape;
};

struct HuggingFacePlacedTensor {
  HuggingFaceTensorSpec spec;
  std::size_t file = 0;  // index into HuggingFaceLayout::files
  uint64_t offset = 0;   // absolute offset of the tensor's first byte in its file
  uint64_t nbytes = 0;
};

struct HuggingFaceFile {
  std::string name;                  // "model-00001-of-00002.safetensors"
  std::string header;                // the file's first bytes: length, JSON, padding
  uint64_t size = 0;                 // header + data
  std::vector<std::size_t> tensors;  // indices into HuggingFaceLayout::tensors, in file order
};

struct HuggingFaceLayout {
  std::vector<HuggingFaceFile> files;
  std::vector<HuggingFacePlacedTensor> tensors;  // in the order given
  uint64_t total_size = 0;                       // bytes of tensor data, all files
  std::map<std::string, std::size_t> by_fqn;     // index into `tensors`

  /// The placed tensor named `fqn`, or nullptr.
  const HuggingFacePlacedTensor* find(const std::string& fqn) const;
};

/// Places `tensors` (each FQN once) into files `model-0000i-of-0000N.safetensors`: by
/// `fqn_to_index_mapping` (FQN -> 1..N; every tensor must be in it; every index up to the largest
/// gets a file) when it is not empty, otherwise in the given order into files of at most
/// `max_file_size` bytes of data (0: one file; a larger tensor gets a file of its own). Within a
/// file, tensors go by element size, largest first (so each is aligned to its element size), then
/// in the given order. Each header's `__metadata__` is DCP's: "DCP_SHARDING_INFO" (zero offsets:
/// the tensors are whole), "DCP_VERSION" "1.0" and "format" "pt". Throws CheckpointError naming
/// the key for a dtype safetensors cannot hold, a shape that overflows, or a bad mapping.
HuggingFaceLayout compute_huggingface_layout(const std::vector<HuggingFaceTensorSpec>& tensors,
                                             const std::map<std::string, int>& fqn_to_index_mapping,
                                             uint64_t max_file_size);

/// What one rank needs to write: the staging and final names of the files, and for each tensor it
/// writes, its file and offset.
struct HuggingFaceRankLayout {
  struct Tensor {
    std::size_t file = 0;
    uint64_t offset = 0;
    at::ScalarType dtype = at::kFloat;
    std::vector<int64_t> shape;
  };
  std::vector<std::string> files;          // final names
  std::vector<std::string> staging_files;  // names while being written
  std::map<std::string, Tensor> tensors;
};

/// The hidden name a file has until the commit renames it: `.<name>.<tag>.partial`.
std::string huggingface_staging_name(const std::string& name, const std::string& tag);

/// The part of `layout` a rank writing `fqns` needs, as text (JSON) for SavePlan::storage_data.
std::string encode_rank_layout(const HuggingFaceLayout& layout, const std::string& tag,
                               const std::vector<std::string>& fqns);
/// Throws CheckpointError when `text` is not what encode_rank_layout makes.
HuggingFaceRankLayout decode_rank_layout(const std::string& text);

}  // namespace dcpp::detail
