#pragma once
// The step checkpoints committed under this host's root. With a shared root those are
// list_checkpoints(root). With a node-local root (CheckpointManagerOptions::node_local_root) each
// host's directory holds its ranks' files and the manifest, and only the coordinator's host holds
// `.metadata`: there a committed step is a `step-...` directory (renamed into place) with its
// manifest.

#include <dcpp/plugin/checkpoint_info.h>

#include <filesystem>
#include <optional>
#include <vector>

namespace dcpp::detail {

/// The CheckpointInfo of a checkpoint at `path` without dcpp's manifest (a plain DCP checkpoint,
/// or a step Megatron-LM saved): the step its directory's name gives (else 0), `bytes` the sizes
/// of its files, the rest defaults.
CheckpointInfo unmanaged_checkpoint_info(const std::filesystem::path& path);

/// The committed step checkpoints (kFull) under `root` on this host, ascending by step: with
/// dcpp's manifest, or Megatron-LM's (list_checkpoints).
std::vector<CheckpointInfo> list_local_steps(const std::filesystem::path& root, bool node_local);

/// The newest of list_local_steps, or nullopt.
std::optional<CheckpointInfo> latest_local_step(const std::filesystem::path& root, bool node_local);

}  // namespace dcpp::detail
