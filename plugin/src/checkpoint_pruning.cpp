// Pruning the checkpoints a RetentionPolicy does not keep: rename to `.deleting`, then remove.

#include "checkpoint_pruning.h"

#include "checkpoint_lineage.h"

#include "core/durable_file.h"
#include "core/logging.h"
#include "stopwatch.h"

#include <algorithm>

namespace dcpp::detail {
namespace fs = std::filesystem;

void prune_checkpoints(const std::vector<CheckpointInfo>& local, const RetentionPolicy& policy,
                       bool sync_files, PhaseLog& log,
                       const std::vector<CheckpointInfo>& other_tiers,
                       const std::function<bool(const CheckpointInfo&)>& may_delete) {
  std::vector<CheckpointInfo> all = local;
  all.insert(all.end(), other_tiers.begin(), other_tiers.end());
  std::vector<CheckpointInfo> doomed;
  for (const CheckpointInfo& abandoned : passed_abandoned(all)) {
    const bool is_local = std::any_of(local.begin(), local.end(), [&](const CheckpointInfo& c) {
      return c.path == abandoned.path;
    });
    if (is_local) doomed.push_back(abandoned);
  }
  if (policy.prunes()) {
    std::vector<CheckpointInfo> kept_by_lineage;
    for (const CheckpointInfo& checkpoint : local) {
      if (!is_abandoned(checkpoint, all)) kept_by_lineage.push_back(checkpoint);
    }
    for (const CheckpointInfo& unwanted : checkpoints_to_delete(kept_by_lineage, policy)) {
      if (!may_delete || may_delete(unwanted)) doomed.push_back(unwanted);
    }
  }
  for (const CheckpointInfo& checkpoint : doomed) {
    const auto start = SteadyClock::now();
    const fs::path deleting = checkpoint.path.string() + kDeletingSuffix;
    try {
      log.begin("prune", "delete", checkpoint.step, checkpoint.path.string());
      rename_durably(checkpoint.path, deleting, sync_files);
      fs::remove_all(deleting);
      log.record("prune", "delete", checkpoint.step, 0, seconds_since(start),
                 checkpoint.path.string());
    } catch (const std::exception& e) {
      logger().warn("pruning '{}' failed: {}", checkpoint.path.string(), e.what());
    }
  }
}

}  // namespace dcpp::detail
