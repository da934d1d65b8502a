#pragma once
// The remote tier of a CheckpointManager (the protocol is at the top of
// <dcpp/plugin/remote_tier.h>): listing the remote steps, copying committed local steps up and
// verifying them, and retention on both tiers.

#include "phase_log.h"

#include <dcpp/plugin/checkpoint_info.h>
#include <dcpp/plugin/remote_tier.h>
#include <dcpp/storage/s3_prefix.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace dcpp::detail {

/// Used on the coordinator only: drain() on the manager's drain thread, list() also on the
/// training thread (S3Prefix is thread-safe). Errors are CheckpointErrors naming the object.
class RemoteTier {
 public:
  RemoteTier(RemoteTierOptions options, PhaseLog& log);

  const RemoteTierOptions& options() const { return options_; }

  /// The complete remote step checkpoints (kFull), ascending by step; `path` is the step's URL.
  /// A step is complete when its `.metadata` and manifest are both there. Abandoned ones
  /// included (checkpoint_lineage.h says which).
  std::vector<CheckpointInfo> list();
  /// "s3://bucket/prefix/step-00001200".
  std::string step_url(int64_t step) const;

  /// One pass of the drain, comparing saves by identity (checkpoint_lineage.h): deletes the
  /// abandoned remote steps the timeline has passed; copies each local checkpoint of the
  /// timeline that the remote lacks (or holds another save of) and its policy keeps (ascending);
  /// deletes the remote steps its policy does not keep; then prunes the root (the steps
  /// `local_policy` does not keep once the remote holds them or would not keep them either, and
  /// the passed abandoned ones). Throws on the first failure; what was done before stays done,
  /// and a step half copied is never complete remotely (the next pass copies it again).
  void drain(const std::filesystem::path& root, const RetentionPolicy& local_policy,
             bool sync_files);

 private:
  // Copies the local step `info` to step_url(info.step): every file but `.metadata` (read back
  // and compared when options_.verify), then `.metadata`. Returns the bytes copied.
  int64_t upload(const CheckpointInfo& info);
  // Deletes the remote step: `.metadata` first, so a half-deleted step is never complete.
  void remove(int64_t step);
  // remove(), logged as a drain phase and saying `why`.
  void remove_logged(int64_t step, const char* why);
  // Uploads one file and, when verifying, compares the store's bytes with it.
  void upload_file(const std::filesystem::path& source, const std::string& name);

  RemoteTierOptions options_;
  S3Prefix prefix_;
  PhaseLog& log_;
};

/// The manifest of the remote checkpoint at `url` ("s3://.../step-00001200"), `path` set to it.
/// Throws CheckpointError (kNotFound) naming the manifest's URL when it is missing.
CheckpointInfo read_remote_checkpoint_info(const std::string& url, const S3Options& s3);

}  // namespace dcpp::detail
