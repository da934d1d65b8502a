#pragma once
// The kind of a managed checkpoint (a resumable step checkpoint or a train-end export), and its
// name in the manifest `dcpp_checkpoint.json`.

#include <dcpp/core/export.h>

#include <optional>
#include <string_view>

namespace dcpp {

/// What a managed checkpoint holds. Its name in the manifest's "kind" field is part of the on-disk
/// format: to_string and parse_checkpoint_kind map each kind to exactly one name and back, and
/// those names never change (checkpoints written by earlier versions still load).
enum class CheckpointKind {
  /// "full": everything the training context holds, as `step-<step>/` (periodic, preemption and
  /// train-end saves alike); the only kind list_checkpoints(), latest() and restore() pick.
  kFull,
  /// "export": a train-end export (CheckpointManager::export_state: the model only, maybe cast)
  /// as `export-step-<step>/`; never resumed from.
  kExport,
};

/// The manifest's name of `kind`: "full" or "export". Never throws.
DCPP_API const char* to_string(CheckpointKind kind);

/// The kind whose manifest name is exactly `name` ("full", "export"); nullopt for any other text
/// (the caller's error names the manifest it read). Never throws.
DCPP_API std::optional<CheckpointKind> parse_checkpoint_kind(std::string_view name);

}  // namespace dcpp
