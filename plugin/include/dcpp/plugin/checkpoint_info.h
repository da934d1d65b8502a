#pragma once
// What a managed checkpoint directory says about itself, readable without loading any tensor.
//
// A managed checkpoint is a directory `step-00001200/` under the manager's root holding a DCP
// checkpoint (`.metadata`, `__<rank>_<n>.distcp`) plus `dcpp_checkpoint.json`, the manifest: the
// step, epoch, metrics, the user's content metadata (Megatron's `content_metadata`), the kind of
// checkpoint and how long saving it took. A directory is a complete checkpoint only when its name
// is exactly `step-<8 digits>` (or `export-step-<8 digits>`) and both files are present: temporary
// directories (`*.incomplete`) and directories being deleted (`*.deleting`) never are.

#include <dcpp/core/export.h>
#include <dcpp/plugin/checkpoint_kind.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace dcpp {

/// User content stored with a checkpoint: versions, configuration, data-loader epoch, ... as
/// strings (serialise structured values, e.g. as JSON text, yourself).
using ContentMetadata = std::map<std::string, std::string>;

/// The manifest of one managed checkpoint.
struct DCPP_API CheckpointInfo {
  std::filesystem::path path;
  int64_t step = 0;
  int64_t epoch = 0;
  /// kFull (everything the training context holds) or kExport (the model only, maybe cast); the
  /// manifest stores it by name ("full", "export"; a manifest without one is "full").
  CheckpointKind kind = CheckpointKind::kFull;
  std::map<std::string, double> metrics;
  ContentMetadata content;
  int world_size = 1;
  /// Seconds since the Unix epoch when the checkpoint was committed.
  double committed_at = 0;
  /// Bytes of every item the checkpoint stores (all ranks' files, as stored), and the seconds each
  /// phase of the save took on the coordinator.
  int64_t bytes = 0;
  double plan_seconds = 0, stage_seconds = 0, write_seconds = 0;
  /// This save's identity (32 hex digits, random): the tiers compare it, not the step, to tell a
  /// step of this run from the same step of a run it abandoned. Empty in manifests written
  /// before dcpp 0.2.
  std::string save_id;
  /// The run it belongs to: its generation, and the step that generation forked from (-1: the
  /// first run). A run that resumes from a step older than the newest of its tiers (a rollback)
  /// forks a new generation; the checkpoints of older generations past the fork are abandoned:
  /// never resumed from, deleted once the new run passes them (docs/storage.md, "Rollbacks").
  int64_t generation = 0;
  int64_t branched_from = -1;
};

/// `step-00001200` for step 1200 (8 digits, more when the step needs them).
DCPP_API std::string step_directory_name(int64_t step);

/// How a CheckpointManager names and writes its steps (CheckpointManagerOptions::step_names).
/// A manager resumes from either kind of step whatever it writes.
enum class StepNames {
  /// `step-00001200/`, in DCP's layout.
  kDcpp,
  /// Megatron-LM's: `iter_0001200/` in Megatron-Core's layout (megatron_storage.h: the state must
  /// hold Megatron's common state, dcpp::megatron::add_common_state, and its other values as
  /// ShardedObjects), and after each commit the step in `latest_checkpointed_iteration.txt` beside
  /// them, which Megatron-LM resumes from. A step Megatron-LM saved there itself (no manifest of
  /// dcpp's) is a step too.
  kMegatronLM,
};

/// Megatron-LM's record of its newest saved iteration, in its save directory: the number alone.
inline constexpr const char* kMegatronTrackerFile = "latest_checkpointed_iteration.txt";

/// The directory name of step `step` under `names`: step_directory_name(step), or Megatron-LM's
/// `iter_0001200` (7 digits, more when the step needs them).
DCPP_API std::string step_directory_name(int64_t step, StepNames names);

/// Reads `path/dcpp_checkpoint.json`. Blocking file I/O; thread-safe. Throws CheckpointError naming
/// the file when it is missing or malformed, or names a kind no CheckpointKind has.
DCPP_API CheckpointInfo read_checkpoint_info(const std::filesystem::path& path);

/// The complete checkpoints of kind CheckpointKind::kFull under `root`, ascending by step (an empty
/// list when `root` does not exist): each step directory (`step-<N>/` or `iter_<N>/`) with a
/// non-empty `.metadata` (an empty one is what a power loss leaves of one never fsynced) and
/// dcpp's manifest, and each that Megatron-LM saved (`iter_<N>/` with `.metadata`
/// and Megatron's `metadata.json`, no manifest: its step from its name, `bytes` its files' sizes).
/// Never returns a temporary or half-deleted directory. Thread-safe.
DCPP_API std::vector<CheckpointInfo> list_checkpoints(const std::filesystem::path& root);

/// The complete kFull checkpoint with the highest step under `root`, if any.
DCPP_API std::optional<CheckpointInfo> latest_checkpoint(const std::filesystem::path& root);

}  // namespace dcpp
