#pragma once
// The remote tier of a CheckpointManager (the protocol is at the top of
// <dcpp/plugin/remote_tier.h>): listing the remote steps, copying committed local steps up and
// verifying them, and retention on both tiers.

#include "drain_lease.h"
#include "phase_log.h"

#include <dcpp/plugin/checkpoint_info.h>
#include <dcpp/plugin/remote_tier.h>
#include <dcpp/storage/s3_prefix.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace dcpp::detail {

/// A step's commit file: its presence makes a remote copy complete (uploaded last but for
/// Megatron's commit, below).
inline constexpr const char* kMetadataFile = ".metadata";

/// The files of a local step directory, relative to it ("/" separated), sorted; `.metadata`
/// excluded, and with `megatron` Megatron-Core's commit `metadata.json` too.
std::vector<std::string> files_before_metadata(const std::filesystem::path& directory,
                                               bool megatron = false);

/// What one rank's drain passes do, as the root is shared (root_sharing.h).
enum class DrainRole {
  /// A root every rank sees: the coordinator copies whole steps, `.metadata` last.
  kWholeSteps,
  /// A node-local root, on the coordinator: copies its host's files of each step, and commits
  /// the step remotely (manifest, then `.metadata`) once every file its `.metadata` names is up
  /// (remote_tier_hosts.cpp). It alone deletes remotely, holds the lease and aborts uploads.
  kHostCoordinator,
  /// A node-local root, on the leader of another host's ranks: copies its host's files.
  kHostFiles,
};

/// Used on the coordinator (and with a node-local root on each host's leader): drain() on the
/// manager's drain thread, list() also on the training thread (S3Prefix is thread-safe). Errors
/// are CheckpointErrors naming the object.
using StepObjects = std::map<std::string, S3ObjectEntry>;  // a remote step's objects, by name

class RemoteTier {
 public:
  /// `rank`: the rank whose drain this is (it names a host's files remotely). `names`: the step
  /// directories' names, locally and remotely; with Megatron-LM's, a step's `metadata.json`
  /// (Megatron's commit) is uploaded after `.metadata` and a remote step is complete with it.
  RemoteTier(RemoteTierOptions options, PhaseLog& log, DrainRole role = DrainRole::kWholeSteps,
             int rank = 0, StepNames names = StepNames::kDcpp);
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
  /// list(), and the objects of each step directory under the prefix that is not complete.
  std::vector<CheckpointInfo> list(std::map<int64_t, StepObjects>* incomplete);
  /// "s3://bucket/prefix/step-00001200" (or ".../iter_0001200").
  std::string step_url(int64_t step) const;

  /// Whether the last pass (kHostCoordinator) left a step whose own files are up and that waits
  /// for other hosts' only: a pass soon after may commit it. Thread-safe.
  bool waiting_for_hosts() const { return waiting_for_hosts_; }

  /// One pass of the drain, comparing saves by identity (checkpoint_lineage.h), after taking or
  /// renewing the prefix's drain lease (drain_lease.h: a heartbeat also renews it between passes;
  /// another job's is kUsage) and aborting the
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
  /// only. With a node-local root (the kHost roles) the local steps are this host's
  /// (local_steps.h) and "copies" means this host's files of the step; only the kHostCoordinator
  /// takes the lease, aborts uploads and deletes remotely, sparing the directories other hosts
  /// may still be copying into (the steps it has yet to commit remotely, and those newer than
  /// its newest local step).
  /// With `listing_bound`, taking the lease and listing the store end within it (an
  /// S3Deadline; a store that does not answer fails the pass, kIo); the copies are not bounded.
  void drain(const std::filesystem::path& root, const RetentionPolicy& local_policy,
             bool sync_files, bool retry_failed_now,
             std::optional<std::chrono::steady_clock::duration> listing_bound = std::nullopt);

 private:
  // kHost roles (remote_tier_hosts.cpp): copies this host's files of the local step `info` that
  // `objects` (its remote directory) lack, then the marker naming them and the save; the
  // kHostCoordinator then commits the step when the markers of its save cover every file its
  // `.metadata` names. Returns "" when this rank's part is done (and, on the coordinator, the
  // step committed), else what the step waits for.
  std::string copy_host_part(const CheckpointInfo& info, const StepObjects& objects);
  // kHostCoordinator: uploads the manifest, then `.metadata`, of `info` when every file its
  // `.metadata` names is up, by the markers of its save; else returns what is missing.
  std::string commit_when_covered(const CheckpointInfo& info);
  // The local files of step directory `directory` (relative names), `.metadata` excluded, each
  // uploaded under `remote_directory`, files_at_once at a time; the first failure is thrown once
  // the others stopped.
  void upload_files(const std::filesystem::path& directory, const std::vector<std::string>& names,
                    const std::string& remote_directory);
  // Copies the local step `info` to step_url(info.step): every file but `.metadata` (read back
  // and compared when options_.verify), then `.metadata`. Returns the bytes copied.
  int64_t upload(const CheckpointInfo& info);
  // Deletes the remote step: `.metadata` first, so a half-deleted step is never complete.
  void remove(int64_t step);
  // remove(), logged as a drain phase and saying `why`.
  void remove_logged(int64_t step, const char* why);
  // Aborts the multipart uploads under the steps' names (a killed drain's), but those under the
  // directories of the steps `in_use` accepts; a store that cannot list them is a warning, once.
  void abort_leftover_uploads(const std::function<bool(int64_t step)>& in_use);
  // upload(info), logged as a drain phase; on failure, the step's backoff grows and the error is
  // returned (logged), not thrown.
  std::exception_ptr upload_or_back_off(const CheckpointInfo& info);
  // `copy`, with the step's backoff: on failure, the step's backoff grows and the error is
  // returned (logged), not thrown.
  std::exception_ptr with_backoff(const CheckpointInfo& info, const std::function<void()>& copy);
  // Sets what backlog() says: the local steps `waiting` for the drain, and the pass's `failure`.
  // `waits`: what steps wait for besides the drain (" step 1200: ...;" each).
  void record_backlog(const std::vector<int64_t>& waiting, const std::exception_ptr& failure,
                      const std::string& waits);
  // Uploads one file and, when verifying, compares the store's bytes with it.
  void upload_file(const std::filesystem::path& source, const std::string& name);

  // What a remote step's manifest and `.metadata` say, read once per `version` (their entity tags
  // and sizes).
  struct RemoteStep {
    std::string version;
    CheckpointInfo info;
    std::map<std::string, uint64_t> extents;  // each file `.metadata` names: the bytes it needs
    size_t objects = 0;  // once found complete with this version: the objects it had; else 0
  };
  // The objects of each step directory (by name, "step-00001200"): while the last listing found
  // at most options_.listing_objects objects, one listing of them all; beyond, the directories by a
  // listing with a delimiter, and for each its commit objects, the rest only where the step is
  // not known complete with those same commit objects: those are added to `known`, with their
  // commit objects alone.
  std::map<std::string, StepObjects> objects_of_steps(std::set<std::string>* known);
  // The version of a step whose objects are `files` ("" without `.metadata` and manifest).
  static std::string version_of(const StepObjects& files);
  // The cached step `directory` when it was found complete with `version`.
  std::optional<RemoteStep> known_complete(const std::string& directory,
                                           const std::string& version);
  // Records that `directory`, at `version`, was complete with `objects` objects.
  void note_complete(const std::string& directory, const std::string& version, size_t objects);
  // The step `directory` ("step-00001200") as described now; nullopt when its manifest is gone.
  std::optional<RemoteStep> describe(const std::string& directory, const std::string& version);
  // What keeps `step` from being complete given its objects `files` (by name), or "".
  std::string missing_file(const RemoteStep& step,
                           const std::map<std::string, S3ObjectEntry>& files) const;
  // Drops the step from the cache (before it is uploaded or deleted).
  void forget(int64_t step);
  // The name of step `step`'s directory ("step-00001200", or "iter_0001200"), and how every step
  // directory's name starts.
  std::string directory_of(int64_t step) const { return step_directory_name(step, names_); }
  const char* directory_prefix() const {
    return names_ == StepNames::kMegatronLM ? "iter_" : "step-";
  }
  bool megatron() const { return names_ == StepNames::kMegatronLM; }

  static constexpr std::chrono::seconds kFirstRetryWait{5};
  static constexpr std::chrono::seconds kLongestRetryWait{300};
  // The local steps whose copy failed: how often in a row, and when a pass may try again.
  struct StepFailures {
    int count = 0;
    std::chrono::steady_clock::time_point next_try;
  };

  RemoteTierOptions options_;
  DrainRole role_;
  int rank_;
  StepNames names_;
  S3Prefix prefix_;
  DrainLease lease_;  // held by the coordinator's drain passes
  PhaseLog& log_;
  std::mutex described_mutex_;                   // guards described_ (list() runs on two threads)
  std::map<std::string, RemoteStep> described_;  // by step directory
  // How many objects the last listing found; beyond options_.listing_objects, steps are listed
  // one by one.
  std::atomic<size_t> listed_objects_{0};
  std::map<int64_t, StepFailures> failing_;  // by step; the drain thread's
  bool uploads_unlisted_ = false;            // the store could not list uploads (warned)
  // kHost roles: the saves (by step) whose host part this process copied; a part gone from the
  // store before the step was committed was deleted (the coordinator does not drain that save).
  std::map<int64_t, std::string> copied_parts_;
  // kHostFiles: the saves whose parts the coordinator deleted before committing them: not
  // copied again (the drain thread's).
  std::set<std::string> undrained_saves_;
  std::atomic<bool> waiting_for_hosts_{false};
  mutable std::mutex backlog_mutex_;  // guards backlog_
  std::string backlog_;               // backlog(), set by each pass
};

/// The job's identity for the drain lease: `options.job_id`, else the environment's (see
/// RemoteTierOptions::job_id), else "".
std::string job_identity(const RemoteTierOptions& options);

/// The manifest of the remote checkpoint at `url` ("s3://.../step-00001200"), `path` set to it.
/// Throws CheckpointError (kNotFound) naming the manifest's URL when it is missing.
CheckpointInfo read_remote_checkpoint_info(const std::string& url, const S3Options& s3);

}  // namespace dcpp::detail
