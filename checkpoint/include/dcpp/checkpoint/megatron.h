#pragma once
// Megatron-Core's dist_checkpointing functions that read a checkpoint's non-sharded parts, in C++
// (docs/megatron.md): its common state and the content metadata saved with it.

#include <dcpp/core/export.h>
#include <dcpp/state_dict/state_dict.h>

#include <filesystem>

namespace dcpp::megatron {

/// Megatron-Core's `load_common_state_dict(checkpoint_dir)`: the common (not sharded) state of the
/// Megatron-Core checkpoint in `directory`, as rank 0 saved it: the ShardedObject `common_state`
/// (Megatron-Core since July 2026), else the legacy `common.pt`. Its values as load reads them
/// (numpy arrays and Megatron's `args` Namespace as PythonObjects, python_object.h). One process,
/// no collective. Throws CheckpointError: kUsage when `directory` is not a Megatron-Core
/// checkpoint (no `metadata.json`), kNotFound when it has no common state, kCorrupt when the state
/// is not a dict, and what reading the checkpoint throws.
DCPP_API StateDict load_common_state_dict(const std::filesystem::path& directory);

/// Megatron-Core's `load_content_metadata(checkpoint_dir)`: the `content_metadata` given to its
/// `save`, kept in the common state; empty when it has none.
DCPP_API StateDict load_content_metadata(const std::filesystem::path& directory);

}  // namespace dcpp::megatron
