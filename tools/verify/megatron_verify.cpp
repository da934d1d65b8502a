// verify's Megatron-Core checks (megatron_verify.h), each through the code of the reader it
// stands for: the layout's make_reader for metadata.json, load_common_state_dict for the common
// state, the ShardedObject key parser and grid check of Megatron's load and save for the objects.
// verify keeps no rules of its own here (no pickle allowlist, no JSON checks): what a reader
// refuses, verify refuses, with the reader's words.

#include "verify/megatron_verify.h"

#include "storage/megatron_object_key.h"

#include <dcpp/checkpoint/megatron.h>
#include <dcpp/core/checkpoint_error.h>
#include <dcpp/storage/checkpoint_layout.h>
#include <dcpp/storage/filesystem_reader_options.h>
#include <dcpp/storage/megatron_storage.h>

#include <algorithm>
#include <map>

namespace dcpp::tools {

namespace fs = std::filesystem;

std::optional<MegatronProblem> megatron_config_problem(const fs::path& directory) {
  const Location location(directory);
  try {
    // The checks every load runs first; integrity.json is verify's own pass (check_integrity).
    checkpoint_layout(location)->make_reader(
        location, FileSystemReaderOptions().with_verify_checksums(false));
  } catch (const c10::Error& error) {
    return MegatronProblem{kMegatronConfigFile, std::nullopt,
                           std::string(error.what_without_backtrace()) +
                               " (every load of this checkpoint refuses it: restore Megatron's "
                               "metadata.json, or resave the checkpoint)"};
  }
  return std::nullopt;
}

std::vector<MegatronProblem> sharded_object_problems(const Metadata& metadata) {
  std::vector<MegatronProblem> problems;
  std::map<std::string, std::vector<detail::MegatronObjectKey>> objects;
  for (const auto& [key, stored] : metadata.state_dict_metadata) {
    if (!std::holds_alternative<BytesStorageMetadata>(stored)) continue;
    try {
      detail::MegatronObjectKey parsed = detail::parse_megatron_object_key(key);
      objects[parsed.key].push_back(std::move(parsed));
    } catch (const c10::Error& error) {
      problems.push_back({".metadata", key,
                          std::string(error.what_without_backtrace()) +
                              " (Megatron's load and load_sharded_metadata read every value item "
                              "as a ShardedObject shard and refuse it)"});
    }
  }
  for (const auto& [key, shards] : objects) {
    try {
      detail::check_sharded_object_grids(
          shards, "",
          "the checkpoint lacks a shard of this ShardedObject, so Megatron's load of it fails: "
          "restore the shard's item from a complete copy, or resave the checkpoint");
    } catch (const c10::Error& error) {
      problems.push_back({".metadata", key, error.what_without_backtrace()});
    }
  }
  return problems;
}

std::optional<MegatronProblem> common_state_problem(const fs::path& directory,
                                                    const Metadata& metadata) {
  try {
    megatron::load_common_state_dict(directory);
  } catch (const c10::Error& error) {
    const bool in_items =
        std::any_of(metadata.state_dict_metadata.begin(), metadata.state_dict_metadata.end(),
                    [](const auto& entry) { return entry.first == kMegatronCommonStateKey; });
    return MegatronProblem{
        in_items ? std::optional<std::string>() : std::string(kMegatronLegacyCommonFile),
        std::string(kMegatronCommonStateKey),
        std::string(error.what_without_backtrace()) +
            " (megatron::load_common_state_dict and Megatron's load read the common state so, "
            "and refuse it: restore it from a copy of the checkpoint, or resave it)"};
  }
  return std::nullopt;
}

}  // namespace dcpp::tools
