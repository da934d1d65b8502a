#pragma once
// Where the conversion and comparison commands read from: a DCP checkpoint directory, a file
// written by Python's `torch.save` (a state dict), or Hugging Face safetensors (one file, or an
// `*.index.json` over shards), or a Hugging Face directory (`*.safetensors` and
// `model.safetensors.index.json`, read by the library's Hugging Face reader). Every source lists
// its entries up front from its metadata alone and hands out one full tensor at a time, so a caller
// that drops each tensor before asking for the next holds one tensor's memory, not the
// checkpoint's.

#include <dcpp/format/metadata.h>
#include <dcpp/state_dict/flatten.h>
#include <dcpp/storage/checkpoint_layout.h>

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace dcpp::tools {

/// One leaf of the source's state dict, flattened as DCP does.
struct SourceEntry {
  std::string key;  // DCP's flat key ("model.linear.weight")
  ObjectPath path;  // the real nesting ("model", "linear.weight")
  bool is_tensor = false;
  at::ScalarType dtype = at::kFloat;  // tensors only
  std::vector<int64_t> shape;         // tensors only: the full (global) shape
  /// File sources (torch-save, safetensors): the name of the file holding the entry, in the
  /// source's directory. Empty for directory sources (DCP, Hugging Face).
  std::string file;

  /// Bytes of the tensor's elements (0 for values).
  uint64_t nbytes() const;
};

/// Not thread-safe. Errors are CheckpointErrors naming the file and the key.
class CheckpointSource {
 public:
  virtual ~CheckpointSource() = default;
  /// "dcp", "torch-save", "safetensors" or "huggingface".
  virtual std::string format() const = 0;
  /// Every entry, in the source's order. Stays valid while the source lives.
  virtual const std::vector<SourceEntry>& entries() const = 0;
  /// The whole tensor `entry` (an entry of this source with is_tensor), contiguous, on the CPU,
  /// freshly read (the source keeps no reference to it).
  virtual at::Tensor read_tensor(const SourceEntry& entry) = 0;
  /// The value of a non-tensor entry.
  virtual c10::IValue read_value(const SourceEntry& entry) = 0;
};

/// Opens `path` by what it is: a location (a directory or a URL) in the layout checkpoint_layout()
/// finds there (DCP's; a Hugging Face directory: no `.metadata`, an index or `*.safetensors`), a
/// zip file (`torch.save`; its
/// top level must be a dict), a `*.index.json` (sharded safetensors) or another file (safetensors).
/// Throws CheckpointError naming `path` when it is none of them or is malformed.
std::unique_ptr<CheckpointSource> open_checkpoint_source(const std::filesystem::path& path);

/// The checkpoint at `location` through `layout`'s StorageReader, whatever its format; format()
/// says "dcp" for DCP's layout, else the layout's name.
std::unique_ptr<CheckpointSource> open_layout_source(const Location& location,
                                                     const CheckpointLayout& layout);

/// The common state of a legacy Megatron-Core checkpoint at `location` of `layout` (its
/// `common.pt`) as current Megatron stores it, the value `[common_state]` of the entry
/// `common_state/shard_0_1`; nullopt for any other checkpoint (one with that entry included).
std::optional<c10::IValue> legacy_megatron_common_state(const Location& location,
                                                        const CheckpointLayout& layout,
                                                        const Metadata& metadata);
std::unique_ptr<CheckpointSource> open_torch_save_source(const std::filesystem::path& file);
std::unique_ptr<CheckpointSource> open_safetensors_source(const std::filesystem::path& path);
std::unique_ptr<CheckpointSource> open_huggingface_source(const std::filesystem::path& directory);

/// The entry with flat key `key`, or nullptr.
const SourceEntry* find_entry(const CheckpointSource& source, const std::string& key);

}  // namespace dcpp::tools
