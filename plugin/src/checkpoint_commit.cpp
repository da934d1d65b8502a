// The commit of a managed checkpoint (the protocol is at the top of checkpoint_commit.h): the
// manifest, then the rename, then the fsync of the root.

#include "checkpoint_commit.h"

#include "checkpoint_info_json.h"
#include "core/durable_file.h"
#include "core/logging.h"
#include "phase_log.h"

namespace dcpp::detail {
namespace fs = std::filesystem;

fs::path incomplete_directory(const fs::path& final_path) {
  return final_path.string() + kIncompleteSuffix;
}

CheckpointInfo make_manifest(const SaveRequest& request, CheckpointKind kind, int world_size,
                             int64_t stored_bytes, const SaveRecord& record, const Lineage& lineage,
                             const std::string& save_id) {
  CheckpointInfo info;
  info.save_id = save_id.empty() ? new_save_id() : save_id;
  info.generation = lineage.generation;
  info.branched_from = lineage.branched_from;
  info.step = request.step;
  info.epoch = request.epoch;
  info.kind = kind;
  info.metrics = request.metrics;
  info.content = request.content;
  info.world_size = world_size;
  info.committed_at = unix_now();
  info.bytes = stored_bytes;
  info.plan_seconds = record.plan_seconds;
  info.stage_seconds = record.stage_seconds;
  info.write_seconds = record.write_seconds;
  return info;
}

void commit_checkpoint(const fs::path& incomplete, const fs::path& final_path,
                       const CheckpointInfo& manifest, bool sync_files) {
  write_file_durably(incomplete / kCheckpointInfoFile, checkpoint_info_to_json(manifest),
                     sync_files);
  const fs::path replaced = final_path.string() + kReplacedSuffix;
  const bool replacing = fs::exists(final_path);
  if (replacing) {
    if (fs::exists(replaced)) fs::remove_all(replaced);
    rename_durably(final_path, replaced, sync_files);
  }
  rename_durably(incomplete, final_path, sync_files);
  if (replacing) fs::remove_all(replaced);
  logger().info("saved step {} to '{}' ({} bytes)", manifest.step, final_path.string(),
                manifest.bytes);
}

void recover_replaced_steps(const fs::path& root, bool sync_files) {
  const size_t suffix = std::char_traits<char>::length(kReplacedSuffix);
  for (const auto& entry : fs::directory_iterator(root)) {
    const fs::path replaced = entry.path();
    const std::string name = replaced.filename().string();
    if (name.size() <= suffix || name.compare(name.size() - suffix, suffix, kReplacedSuffix) != 0) {
      continue;
    }
    const fs::path final_path = root / name.substr(0, name.size() - suffix);
    const fs::path incomplete = incomplete_directory(final_path);
    try {
      if (fs::exists(final_path)) {
        logger().info("removing '{}', left by a commit killed after it replaced the step",
                      replaced.string());
      } else if (fs::exists(incomplete / kCheckpointInfoFile)) {
        logger().warn("finishing the commit of '{}' that a killed job left (its save was complete)",
                      final_path.string());
        rename_durably(incomplete, final_path, sync_files);
      } else {
        logger().warn("'{}' is back: the save replacing it was killed before its commit",
                      final_path.string());
        rename_durably(replaced, final_path, sync_files);
        continue;
      }
      fs::remove_all(replaced);
    } catch (const std::exception&) {
      // Another rank of this host (a node-local root) may have resolved it meanwhile.
      std::error_code ignored;
      if (fs::exists(replaced, ignored) || !fs::exists(final_path, ignored)) throw;
    }
  }
}

}  // namespace dcpp::detail
