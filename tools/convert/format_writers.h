#pragma once
// The writers behind `dcpp convert --to`: each streams the source one tensor at a time, so memory
// stays about the largest tensor and its cast copy. Each throws CheckpointError naming the key or
// file on failure, and leaves no partial output at the destination's name.

#include "convert/conversion.h"

#include <dcpp/format/metadata.h>
#include <dcpp/planner/save_planner.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace dcpp::tools {

/// One file Python's `torch.load` and libtorch's `torch::pickle_load` read: `torch.save` of the
/// nested state dict (DCP's `dcp_to_torch_save`), full tensors and values. The archive is written
/// to `dst`.partial and renamed to `dst` when complete. Returns the files written.
std::vector<std::filesystem::path> write_torch_save(Conversion& conversion,
                                                    const std::filesystem::path& dst);

/// A DCP checkpoint in directory `dst` (DCP's `torch_save_to_dcp`): one chunk per tensor in
/// `__0_0.distcp`, written by dcpp's own save (so `.metadata` appears last, atomically), its items
/// zstd-compressed at `zstd_level` when given (PyTorch 2.14 reads them). Refuses a directory that
/// already holds a checkpoint.
std::vector<std::filesystem::path> write_dcp(Conversion& conversion,
                                             const std::filesystem::path& dst,
                                             std::optional<int> zstd_level = std::nullopt);

/// Hugging Face safetensors: `dst` when every tensor fits in `max_shard_size` bytes (0: no
/// limit), otherwise shards `<stem>-00001-of-0000N.safetensors` beside it and
/// `<stem>.safetensors.index.json` ("metadata": {"total_size"}, "weight_map": {key: shard}), where
/// `<stem>` is `dst`'s name without ".safetensors". Tensors keep their flat keys; values go into
/// `__metadata__` as JSON text under their flat key, beside "format": "pt". Complex dtypes, which
/// safetensors cannot name, are a CheckpointError naming the key.
std::vector<std::filesystem::path> write_safetensors(Conversion& conversion,
                                                     const std::filesystem::path& dst,
                                                     uint64_t max_shard_size);

/// A Hugging Face checkpoint directory `dst` (`model-0000i-of-0000N.safetensors` and
/// `model.safetensors.index.json`), written by dcpp's own save through the library's Hugging Face
/// writer (its commit protocol: the index appears last). Files of at most `max_shard_size` bytes
/// of tensor data (0: one file). Safetensors hold only tensors: values are skipped and their keys
/// returned in `skipped`. Refuses a directory that already holds a checkpoint. Returns the files
/// written.
std::vector<std::filesystem::path> write_huggingface(Conversion& conversion,
                                                     const std::filesystem::path& dst,
                                                     uint64_t max_shard_size,
                                                     std::vector<std::string>& skipped);

/// A Megatron-Core `torch_dist` checkpoint in directory `dst` (megatron_storage.h), which
/// Megatron-Core's `dist_checkpointing.load` reads: tensors as DCP's, then `metadata.json` and,
/// with `integrity_file`, `integrity.json`. A Megatron-Core source keeps its common state and
/// ShardedObjects as they are; from any other source, the values become the common state (at
/// their paths) and the tensors stay sharded tensors. Refuses a directory that already holds a
/// checkpoint. Returns the files written.
std::vector<std::filesystem::path> write_megatron(Conversion& conversion,
                                                  const std::filesystem::path& dst,
                                                  bool integrity_file);

/// The data files `metadata` names, under `dst`, sorted, each once.
std::vector<std::filesystem::path> data_files_of(const std::filesystem::path& dst,
                                                 const Metadata& metadata);

/// The save planner `write_dcp`, `write_megatron` and `write_huggingface` use: dcpp's default
/// planner, but each tensor is read from the conversion's source only when the storage writer asks
/// for it.
std::shared_ptr<SavePlanner> make_streaming_save_planner(Conversion& conversion);

}  // namespace dcpp::tools
