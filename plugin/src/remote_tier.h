#pragma once
// The remote tier of a CheckpointManager (the protocol is at the top of
// <dcpp/plugin/remote_tier.h>): listing the remote steps, copying committed local steps up and
// verifying them, and retention on both tiers.

#include "drain_lease.h"
#include "phase_log.h"

#include <dcpp/plugin/checkpoint_info.h>
#include <dcpp/plugin/remote_tier.h>
#include <dcpp/storage/s3_prefix.h>

#include <chrono>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace dcpp::detail {

/// A step's commit file: its presence makes a remote copy complete (uploaded last).
inline constexpr const char* kMetadataFile = ".metadata";

/// Used on the coordinator only: drain() on the manager's drain thread, list() also on the
/// training thread (S3Prefix is thread-safe). Errors are CheckpointErrors naming the object.
class RemoteTier {
 public:
  RemoteTier(RemoteTierOptions options, PhaseLog& log);
  /// Releases the drain lease this job holds (after the last pass).
  ~RemoteTier();

  const RemoteTierOptions& options() const { return options_; }

  /// What the last drain pass left undone: "2 steps (1200, 1300) wait for the drain to URL (its
  /// last failure: ...)", or "" when it left nothing. Thread-safe.
  std::string backlog() const;

  /// The complete remote step checkpoints (kFull), ascending by step; `path` is the step's URL.
  /// A step is complete when its `.metadata` and manifest are both there and every file its
  /// `.metadata` names is too, holding at least the bytes its items need. Abandoned ones included
  /// (checkpoint_lineage.h says which). Each step's manifest and `.metadata` are read once and
  /// kept while the listing gives them the same entity tags and sizes.
  std::vector<CheckpointInfo> list();
  /// list(), and the steps of the directories under the prefix that are not complete.
  std::vector<CheckpointInfo> list(std::vector<int64_t>* incomplete);
  /// "s3://bucket/prefix/step-00001200".
  std::string step_url(int64_t step) const;

  /// One pass of the drain, comparing saves by identity (checkpoint_lineage.h), after taking or
  /// renewing the prefix's drain lease (drain_lease.h; another job's is kUsage) and aborting the
  /// multipart uploads a killed drain left: deletes the
  /// abandoned remote steps the timeline has passed; copies each local checkpoint of the
  /// timeline that the remote lacks (or holds another save of) and its policy keeps (ascending);
  /// deletes the remote steps its policy does not keep, and the incomplete ones a copy or a
  /// deletion cut short left (unless a copy of the step is still due); then prunes the root (the
  /// steps `local_policy` does not keep once the remote holds them or would not keep them
  /// either, and the passed abandoned ones). A step whose copy fails stays local and is skipped by
  /// the next passes until its backoff passed (5 s, doubling up to 5 min; `retry_failed_now`
  /// tries every step at once); the other steps go on, and the pass then throws the first copy's
  /// failure. A listing or deletion that fails throws at once. What was done stays done, and a
  /// step half copied is never complete remotely (a later pass copies it again). Drain thread
  /// only.
  void drain(const std::filesystem::path& root, const RetentionPolicy& local_policy,
             bool sync_files, bool retry_failed_now);

 private:
  // Copies the local step `info` to step_url(info.step): every file but `.metadata` (read back
  // and compared when options_.verify), then `.metadata`. Returns the bytes copied.
  int64_t upload(const CheckpointInfo& info);
  // Deletes the remote step: `.metadata` first, so a half-deleted step is never complete.
  void remove(int64_t step);
  // remove(), logged as a drain phase and saying `why`.
  void remove_logged(int64_t step, const char* why);
  // Aborts the multipart uploads under the steps' names (a killed drain's); a store that cannot
  // list them is a warning, once.
  void abort_leftover_uploads();
  // upload(info), logged as a drain phase; on failure, the step's backoff grows and the error is
  // returned (logged), not thrown.
  std::exception_ptr upload_or_back_off(const CheckpointInfo& info);
  // Sets what backlog() says: the local steps `waiting` for the drain, and the pass's `failure`.
  void record_backlog(const std::vector<int64_t>& waiting, const std::exception_ptr& failure);
  // Uploads one file and, when verifying, compares the store's bytes with it.
  void upload_file(const std::filesystem::path& source, const std::string& name);

  // What a remote step's manifest and `.metadata` say, read once per `version` (their entity tags
  // and sizes).
  struct RemoteStep {
    std::string version;
    CheckpointInfo info;
    std::map<std::string, uint64_t> extents;  // each file `.metadata` names: the bytes it needs
  };
  // The step `directory` ("step-00001200") as described now; nullopt when its manifest is gone.
  std::optional<RemoteStep> describe(const std::string& directory, const std::string& version);
  // What keeps `step` from being complete given its objects `files` (by name), or "".
  std::string missing_file(const RemoteStep& step,
                           const std::map<std::string, S3ObjectEntry>& files) const;
  // Drops the step from the cache (before it is uploaded or deleted).
  void forget(int64_t step);

  static constexpr std::chrono::seconds kFirstRetryWait{5};
  static constexpr std::chrono::seconds kLongestRetryWait{300};
  // The local steps whose copy failed: how often in a row, and when a pass may try again.
  struct StepFailures {
    int count = 0;
    std::chrono::steady_clock::time_point next_try;
  };

  RemoteTierOptions options_;
  S3Prefix prefix_;
  DrainLease lease_;  // held by the coordinator's drain passes
  PhaseLog& log_;
  std::mutex described_mutex_;                   // guards described_ (list() runs on two threads)
  std::map<std::string, RemoteStep> described_;  // by step directory
  std::map<int64_t, StepFailures> failing_;      // by step; the drain thread's
  bool uploads_unlisted_ = false;                // the store could not list uploads (warned)
  mutable std::mutex backlog_mutex_;             // guards backlog_
  std::string backlog_;                          // backlog(), set by each pass
};

/// The manifest of the remote checkpoint at `url` ("s3://.../step-00001200"), `path` set to it.
/// Throws CheckpointError (kNotFound) naming the manifest's URL when it is missing.
CheckpointInfo read_remote_checkpoint_info(const std::string& url, const S3Options& s3);

}  // namespace dcpp::detail
