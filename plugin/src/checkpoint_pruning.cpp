// Pruning the checkpoints a RetentionPolicy does not keep: rename to `.deleting`, then remove.

#include "checkpoint_pruning.h"

#include "core/durable_file.h"
#include "core/logging.h"
#include "stopwatch.h"

namespace dcpp::detail {
namespace fs = std::filesystem;

void prune_checkpoints(const fs::path& root, const RetentionPolicy& policy, bool sync_files,
                       PhaseLog& log,
                       const std::function<bool(const CheckpointInfo&)>& may_delete) {
  if (!policy.prunes()) return;
  for (const CheckpointInfo& doomed : checkpoints_to_delete(list_checkpoints(root), policy)) {
    if (may_delete && !may_delete(doomed)) continue;
    const auto start = SteadyClock::now();
    const fs::path deleting = doomed.path.string() + kDeletingSuffix;
    try {
      log.begin("prune", "delete", doomed.step, doomed.path.string());
      rename_durably(doomed.path, deleting, sync_files);
      fs::remove_all(deleting);
      log.record("prune", "delete", doomed.step, 0, seconds_since(start), doomed.path.string());
    } catch (const std::exception& e) {
      logger().warn("pruning '{}' failed: {}", doomed.path.string(), e.what());
    }
  }
}

}  // namespace dcpp::detail
