#pragma once
// `dcpp convert --keys PREFIX...` and `--drop PREFIX...`: a source narrowed to the entries under
// some FQN prefixes, or to those under none of them.

#include "convert/checkpoint_source.h"

#include <memory>
#include <string>
#include <vector>

namespace dcpp::tools {

/// True when `prefix` is `key` or its first '.'-separated components: "model" matches "model" and
/// "model.w", not "models.x"; "model.linear" matches "model.linear.weight". A '/' separates too:
/// "rng_state" matches the ShardedObject shards "rng_state/shard_0.1_1.2" of a Megatron checkpoint.
bool key_has_prefix(const std::string& key, const std::string& prefix);

/// `source` showing only the entries whose flat key has one of `prefixes` (in the source's order);
/// reads go to `source`. Throws CheckpointError naming the first prefix that matches no entry of
/// the source, which `source_name` names.
std::unique_ptr<CheckpointSource> select_keys(std::unique_ptr<CheckpointSource> source,
                                              const std::vector<std::string>& prefixes,
                                              const std::string& source_name);

/// `source` without the entries whose flat key has one of `prefixes`; reads go to `source`.
/// Throws CheckpointError naming the first prefix that matches no entry of the source.
std::unique_ptr<CheckpointSource> drop_keys(std::unique_ptr<CheckpointSource> source,
                                            const std::vector<std::string>& prefixes,
                                            const std::string& source_name);

}  // namespace dcpp::tools
