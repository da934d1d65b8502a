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
  if (fs::exists(final_path)) fs::remove_all(final_path);
  rename_durably(incomplete, final_path, sync_files);
  logger().info("saved step {} to '{}' ({} bytes)", manifest.step, final_path.string(),
                manifest.bytes);
}

}  // namespace dcpp::detail
