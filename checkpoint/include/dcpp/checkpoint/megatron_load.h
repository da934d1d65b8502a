#pragma once
// Megatron-Core's `dist_checkpointing.load(..., strict=StrictHandling)` in C++ (docs/megatron.md):
// a load that handles the keys it finds on one side only as Megatron's eight modes say.

#include <dcpp/checkpoint/checkpointer.h>
#include <dcpp/core/export.h>
#include <dcpp/state_dict/state_dict.h>

#include <filesystem>
#include <set>
#include <string>

namespace dcpp::megatron {

/// Megatron-Core's StrictHandling: what a load does with "unexpected" keys (requested by this
/// rank, absent from the checkpoint; they may differ from rank to rank) and "missing" keys (in the
/// checkpoint, requested by no rank: the same on every rank). Keys are Megatron's: a tensor's, or
/// a ShardedObject's (its shards' `<key>/shard_...` count as `<key>`); the common state is not one.
enum class StrictHandling {
  /// Checks nothing first: an unexpected key fails the load as dcpp::load fails (the default).
  kAssumeOkUnexpected,
  /// Logs the unexpected keys (a warning) and loads the rest.
  kLogUnexpected,
  /// Logs the unexpected and the missing keys and loads the rest.
  kLogAll,
  /// Throws on unexpected keys before loading anything.
  kRaiseUnexpected,
  /// Throws on unexpected or missing keys before loading anything.
  kRaiseAll,
  /// Loads the rest and returns the unexpected keys.
  kReturnUnexpected,
  /// Loads the rest and returns the unexpected and the missing keys.
  kReturnAll,
  /// Loads the rest and says nothing.
  kIgnoreAll,
};

/// Keys found on one side only, Megatron's way (StrictHandling): sorted.
struct DCPP_API MismatchedKeys {
  std::set<std::string> missing_keys;
  std::set<std::string> unexpected_keys;
};

/// Megatron-Core's `validate_access_integrity` of a load: whether the ranks' state dicts are
/// checked, together, before anything is read.
enum class AccessIntegrity {
  /// Megatron's default: every tensor requested has one dtype and global shape on every rank,
  /// and the chunks the ranks request tile it, each element once (a chunk several ranks request
  /// is one, with replicas; uneven chunks are allowed, as in dcpp's saves); every ShardedObject
  /// requested has its whole grid of shards requested, each once. Costs an all-gather of every
  /// rank's plan.
  kValidate,
  /// Loads whatever each rank requests (a part of a tensor, a shard of an object alone).
  kSkip,
};

/// Megatron-Core's `load(sharded_state_dict, checkpoint_dir, strict=...,
/// validate_access_integrity=...)`: loads `state_dict` from the Megatron-Core checkpoint in
/// `directory` as dcpp::load does (in place, resharded), with `strict`'s handling of mismatched
/// keys. Every mode but kAssumeOkUnexpected leaves the unexpected keys out of the load (their
/// values stay as they were); the *All modes find the missing keys from every rank's keys (an
/// all-gather of them over `options.ranks`). kRaise* throws CheckpointError (kNotFound) on every
/// rank, naming the keys and the ranks, before anything is read; kReturn* returns what its mode
/// finds, the others empty sets. Then, as `access` says, the ranks' requests are validated
/// together (AccessIntegrity): what breaks it is a CheckpointError (kUsage) on every rank, naming
/// the key, before anything is read. Collective over `options.ranks.process_group` (or one
/// process). A Stateful in `state_dict` is refused (kUsage): give Megatron-style state, tensors
/// and values. Throws as dcpp::load otherwise.
DCPP_API MismatchedKeys load(StateDict& state_dict, const std::filesystem::path& directory,
                             StrictHandling strict, const LoadOptions& options = {},
                             AccessIntegrity access = AccessIntegrity::kValidate);

}  // namespace dcpp::megatron
