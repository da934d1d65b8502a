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

/// The committed step checkpoints (kFull) under `root` on this host, ascending by step.
std::vector<CheckpointInfo> list_local_steps(const std::filesystem::path& root, bool node_local);

/// The newest of list_local_steps, or nullopt.
std::optional<CheckpointInfo> latest_local_step(const std::filesystem::path& root, bool node_local);

}  // namespace dcpp::detail
