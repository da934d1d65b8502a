#pragma once
// `dcpp verify` on a Megatron-Core checkpoint: what dcpp's readers check beyond DCP's files,
// through the readers' own code, so that verify refuses exactly what a reader refuses.

#include <dcpp/format/metadata.h>

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace dcpp::tools {

/// One problem, as verify_checkpoint's report lists them.
struct MegatronProblem {
  std::optional<std::string> file;
  std::optional<std::string> key;
  std::string problem;
};

/// `metadata.json` of the checkpoint in `directory`, checked by the megatron-core layout's reader
/// (its make_reader, as every load and read_metadata does): the torch_dist backend, version 1, the
/// torch common backend. A problem naming `metadata.json` when the reader refuses it; nullopt when
/// it reads it.
std::optional<MegatronProblem> megatron_config_problem(const std::filesystem::path& directory);

/// Megatron's validate_sharded_objects on what `.metadata` holds: every value item's key parses as
/// a ShardedObject shard's (`<key>/shard_<offsets>_<shape>`, as load_sharded_metadata reads it),
/// and each ShardedObject's shards cover its global shape, each once (a legacy key's shape, one
/// dimension short, is not checked, as Megatron does not). One problem per key that does not parse
/// and per object whose grid is short or out of shape, each naming `.metadata` and the key.
std::vector<MegatronProblem> sharded_object_problems(const Metadata& metadata);

/// The common state of the checkpoint in `directory` (whose `.metadata` is `metadata`) read by
/// dcpp::megatron::load_common_state_dict itself (the common_state item, else the legacy
/// `common.pt`, through the readers' pickle decoder, a dict): a problem naming the key, and
/// `common.pt` when that is what was read, when it refuses it; nullopt when it reads it. With an
/// `integrity.json`, the reader checks every file's SHA-256 once more.
std::optional<MegatronProblem> common_state_problem(const std::filesystem::path& directory,
                                                    const Metadata& metadata);

}  // namespace dcpp::tools
