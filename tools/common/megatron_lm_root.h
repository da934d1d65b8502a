#pragma once
// Megatron-LM's save directory as a command's CKPT: `iter_<7+ digits>/` checkpoints beside
// `latest_checkpointed_iteration.txt` (its `--save` directory, as Megatron-LM's training loop and a
// CheckpointManager with StepNames::kMegatronLM leave it). A command reads the iteration the
// tracker names, as Megatron-LM's `--load` does, or the one `--step` gives.

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

namespace dcpp::tools {

/// True when `directory` is no checkpoint itself (no `.metadata`, no `__0.metadata`, no
/// `metadata.json`) but holds `latest_checkpointed_iteration.txt` or an `iter_<7+ digits>`
/// directory.
bool is_megatron_lm_root(const std::filesystem::path& directory);

/// The checkpoint of a Megatron-LM save directory a command reads.
struct MegatronLmCheckpoint {
  std::filesystem::path directory;   // root / "iter_0000050" (or "release")
  std::optional<int64_t> iteration;  // nullopt for "release"
  std::string chosen_by;             // "tracker", "--step" or "newest" (no tracker)
  /// {"root": str, "directory": name, "iteration": n|null, "chosen_by": str}.
  nlohmann::json to_json(const std::filesystem::path& root) const;
};

/// The checkpoint of the save directory `root` to read: `iter_<step>` when `step` is given, else
/// the one the tracker names (`release/` for "release"), else, without a tracker, the newest
/// complete iteration. Throws CheckpointError: kNotFound, naming the iteration and listing the
/// complete ones, when the chosen one is not a complete checkpoint (list_checkpoints), or there
/// is none; kCorrupt, naming the tracker, when its text is no iteration number.
MegatronLmCheckpoint megatron_lm_checkpoint(const std::filesystem::path& root,
                                            std::optional<int64_t> step);

}  // namespace dcpp::tools
