#pragma once
// The commit of a managed checkpoint: how a saved `<name>.incomplete/` becomes `<name>/` with its
// manifest. The protocol, for every save (sync, async, export):
//   1. every rank saves its part with dcpp::save into `<name>.incomplete/`; dcpp::save returns (or
//      completes its upload) on a rank only after the coordinator wrote and fsynced `.metadata`,
//      i.e. after every rank's data is durable;
//   2. the coordinator then commits (commit_checkpoint): the manifest `dcpp_checkpoint.json`
//      (tmp, fsync, rename) into the directory, the rename to `<name>/`, an fsync of the root;
//   3. with Megatron-LM's step names (StepNames::kMegatronLM), whose saves write Megatron's
//      `metadata.json` inside the directory before step 2, the coordinator then writes the step
//      into `latest_checkpointed_iteration.txt` (tmp, fsync, rename), as Megatron-LM does once a
//      save is complete.
// A save that replaces a step (a rollback's, of a step its run abandons) moves the old `<name>/`
// aside to `<name>.replaced/` (a rename) before the new one is renamed into place, and removes it
// only then: no moment leaves a `<name>/` without all its files.
// A job killed at any moment leaves a complete `<name>/` or an `.incomplete` directory, which
// list_checkpoints() ignores and the next manager on the root removes; and at most one
// `.replaced` directory, which the next manager resolves (recover_replaced_steps).

#include "checkpoint_lineage.h"

#include <dcpp/plugin/checkpoint_info.h>
#include <dcpp/plugin/checkpoint_kind.h>
#include <dcpp/plugin/checkpoint_manager.h>

#include <cstdint>
#include <filesystem>
#include <string>

namespace dcpp::detail {

/// The suffix of the directory a save writes into before its commit.
inline constexpr const char* kIncompleteSuffix = ".incomplete";

/// The suffix of a step moved aside while a save replaces it.
inline constexpr const char* kReplacedSuffix = ".replaced";

/// `<final_path>.incomplete`: where every rank saves the checkpoint that commits as `final_path`.
std::filesystem::path incomplete_directory(const std::filesystem::path& final_path);

/// The manifest of a save of `request` as `kind`: `stored_bytes`, every item the checkpoint stores
/// (all ranks'); the plan, stage and write seconds of `record` (the coordinator's); committed now.
/// Its save identity `save_id` (a new one when empty), and `lineage`. `path` is left empty
/// (read_checkpoint_info fills it in).
CheckpointInfo make_manifest(const SaveRequest& request, CheckpointKind kind, int world_size,
                             int64_t stored_bytes, const SaveRecord& record, const Lineage& lineage,
                             const std::string& save_id);

/// Step 2 of the protocol, on the coordinator only (with a node-local root, on each host's
/// leader, into its host's directory, with the same manifest), after dcpp::save completed on it:
/// writes
/// `manifest` into `incomplete`, renames `incomplete` to `final_path` (a directory there first
/// renamed to `<final_path>.replaced`, removed after) and logs the saved step; the fsyncs only with
/// `sync_files`. Blocking; throws CheckpointError (or std::filesystem::filesystem_error) when a
/// step fails, and then nothing was renamed to `final_path`.
void commit_checkpoint(const std::filesystem::path& incomplete,
                       const std::filesystem::path& final_path, const CheckpointInfo& manifest,
                       bool sync_files);

/// Before any save on `root`, for each `<name>.replaced/` a killed commit left: removed when
/// `<name>/` exists; else the save that replaced it is finished when its `<name>.incomplete/`
/// holds the manifest (written last, so it is complete: renamed into place); else it is renamed
/// back to `<name>/`. Throws std::filesystem::filesystem_error or CheckpointError.
void recover_replaced_steps(const std::filesystem::path& root, bool sync_files);

}  // namespace dcpp::detail
