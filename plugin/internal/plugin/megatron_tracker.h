#pragma once
// Megatron-LM's tracker file, `latest_checkpointed_iteration.txt` in its save directory, read as
// Megatron-LM's `read_metadata` (megatron/training/checkpointing.py) reads it: the file's text
// stripped of white space is an iteration number (`int()`), or "release". Read by the
// CheckpointManager's restore and by the `dcpp` commands given a save directory as their CKPT.

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

namespace dcpp::detail {

/// What the tracker says.
struct MegatronTracker {
  /// The iteration it names; nullopt for "release" or a text Megatron-LM refuses.
  std::optional<int64_t> iteration;
  /// It says "release" (Megatron-LM then loads `release/`).
  bool release = false;
  /// Why it names no iteration (empty when it names one): "it says 'release'", or that its text
  /// is no iteration number, quoted (at most 40 bytes of it).
  std::string problem;
};

/// The tracker file's path under `root`.
std::filesystem::path megatron_tracker_path(const std::filesystem::path& root);

/// The tracker of the save directory `root`; nullopt when `root` has none (or it cannot be read).
/// Never throws.
std::optional<MegatronTracker> read_megatron_tracker(const std::filesystem::path& root);

}  // namespace dcpp::detail
