#pragma once
// The small JSON files of a Megatron-Core checkpoint (metadata.json, integrity.json), read alike.

#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>

namespace dcpp::detail {

/// Megatron-Core's `metadata.json` of a `torch_dist` checkpoint, byte for byte (its `save_config`:
/// `json.dump(asdict(CheckpointingConfig("torch_dist", 1)))`).
inline constexpr const char* kMegatronConfigText =
    "{\"sharded_backend\": \"torch_dist\", \"sharded_backend_version\": 1}";

/// The JSON object in `path`. Throws CheckpointError naming the file: kNotFound when it cannot be
/// read, kCorrupt when it is not a JSON object (`written` is what Megatron-Core writes there).
nlohmann::json read_megatron_json(const std::filesystem::path& path, const std::string& written);

/// Throws CheckpointError (kCorrupt) naming `path`: its `problem`, and what Megatron-Core writes.
[[noreturn]] void megatron_json_corrupt(const std::filesystem::path& path,
                                        const std::string& problem, const std::string& written);

}  // namespace dcpp::detail
