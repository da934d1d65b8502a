#pragma once
// `dcpp inspect FILE`: a `torch.save` file of a state dict, or safetensors (one file, or the
// `*.index.json` of shards), read through its CheckpointSource (checkpoint_source.h).

#include <nlohmann/json.hpp>

#include <filesystem>

namespace dcpp::tools {

/// inspect's document (inspect_command.h) for a file: "format" is "torch-save" or "safetensors",
/// "version" null; each tensor is one chunk, the whole tensor, in the file holding it ("offset"
/// null, "length" its bytes); values have kind "bytes" like DCP's; "files" and "top_level" give
/// sizes. With `with_stats`, each tensor's stats (read one tensor at a time). Throws
/// CheckpointError naming the file for a missing or malformed one.
nlohmann::json inspect_file(const std::filesystem::path& file, bool with_stats);

}  // namespace dcpp::tools
