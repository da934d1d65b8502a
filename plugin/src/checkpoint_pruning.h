#pragma once
// Retention on disk: deleting the checkpoints a RetentionPolicy does not keep (the choice itself is
// checkpoints_to_delete, retention_policy.h). The manager runs it on the coordinator, on its
// background worker after each commit, never on the training thread.

#include "phase_log.h"

#include <dcpp/plugin/retention_policy.h>

#include <filesystem>
#include <functional>
#include <vector>

namespace dcpp::detail {

/// The suffix a doomed checkpoint is renamed to before it is removed, so that a half-deleted one
/// is never taken for a checkpoint (the next manager on the root removes what a kill left).
inline constexpr const char* kDeletingSuffix = ".deleting";

/// Deletes each of `local` (the complete checkpoints of a root, as list_checkpoints or
/// list_local_steps give them) that `policy` does not keep among the resumable ones, and each
/// abandoned one the timeline has passed (checkpoint_lineage.h; `other_tiers`, the remote tier's
/// checkpoints, count for both): renames it to `<dir>.deleting` (durably with `sync_files`), then
/// removes it, recording ("prune", "delete") on `log`. Blocking file I/O; a deletion that fails is
/// logged (warning) and skipped, the others go on. Not safe to run twice at once on one root.
/// `may_delete`, when given, vetoes the policy's deletions (a remote tier keeps a step not yet
/// copied), not the abandoned ones'.
void prune_checkpoints(const std::vector<CheckpointInfo>& local, const RetentionPolicy& policy,
                       bool sync_files, PhaseLog& log,
                       const std::vector<CheckpointInfo>& other_tiers = {},
                       const std::function<bool(const CheckpointInfo&)>& may_delete = {});

}  // namespace dcpp::detail
