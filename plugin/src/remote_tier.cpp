// The remote tier's drain: step checkpoints copied file by file to an S3 prefix, `.metadata`
// last, retention on both tiers, the lease and what killed drains left (the listing is in
// remote_tier_listing.cpp).

#include "remote_tier.h"

#include "checkpoint_info_json.h"
#include "checkpoint_lineage.h"
#include "checkpoint_pruning.h"
#include "core/exception_message.h"
#include "core/logging.h"
#include "local_steps.h"
#include "step_names.h"
#include "stopwatch.h"

#include <dcpp/checkpoint/checkpointer.h>
#include <dcpp/core/checkpoint_error.h>
#include <dcpp/plugin/retention_policy.h>
#include <dcpp/storage/megatron_storage.h>
#include <dcpp/storage/s3_deadline.h>
#include <dcpp/storage/s3_storage.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <exception>
#include <iterator>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

namespace dcpp::detail {
namespace fs = std::filesystem;

std::vector<std::string> files_before_metadata(const fs::path& directory, bool megatron) {
  std::vector<std::string> names;
  for (const auto& entry : fs::recursive_directory_iterator(directory)) {
    if (!entry.is_regular_file()) continue;
    const std::string name = entry.path().lexically_relative(directory).generic_string();
    if (name != kMetadataFile && !(megatron && name == kMegatronConfigFile)) {
      names.push_back(name);
    }
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::string job_identity(const RemoteTierOptions& options) {
  if (!options.job_id.empty()) return options.job_id;
  for (const char* name : {"DCPP_JOB_ID", "SLURM_JOB_ID", "TORCHELASTIC_RUN_ID"}) {
    const char* value = std::getenv(name);
    if (value != nullptr && *value != '\0') return value;
  }
  return {};
}

RemoteTier::RemoteTier(RemoteTierOptions options, PhaseLog& log, DrainRole role, int rank,
                       StepNames names)
    : options_(std::move(options)),
      role_(role),
      rank_(rank),
      names_(names),
      prefix_(options_.url, options_.s3),
      lease_(prefix_, options_.drain_lease, job_identity(options_)),
      log_(log) {}

RemoteTier::~RemoteTier() { lease_.release(); }

std::string RemoteTier::step_url(int64_t step) const { return prefix_.url_of(directory_of(step)); }

void RemoteTier::drain(const fs::path& root, const RetentionPolicy& local_policy, bool sync_files,
                       bool retry_failed_now,
                       std::optional<std::chrono::steady_clock::duration> listing_bound) {
  const bool deletes = role_ != DrainRole::kHostFiles;  // and holds the lease
  std::map<int64_t, StepObjects> incomplete;
  std::vector<CheckpointInfo> remote;
  {
    std::optional<S3Deadline> bound;
    if (listing_bound) bound.emplace(*listing_bound, "RemoteTierOptions::restart_timeout");
    if (deletes && options_.drain_lease.count() > 0) lease_.hold();
    remote = list(&incomplete);
  }
  const std::vector<CheckpointInfo> local = list_local_steps(root, role_ != DrainRole::kWholeSteps);
  std::vector<CheckpointInfo> all = local;  // local first: preferred
  all.insert(all.end(), remote.begin(), remote.end());
  std::map<int64_t, std::string> remote_save_ids;
  for (const CheckpointInfo& info : remote) remote_save_ids[info.step] = info.save_id;
  const auto held_remotely = [&](const CheckpointInfo& info) {
    const auto found = remote_save_ids.find(info.step);
    return found != remote_save_ids.end() && found->second == info.save_id;
  };
  // The timeline a resume takes, one checkpoint per step; the remote policy keeps some of it.
  const std::vector<CheckpointInfo> timeline = resumable(all);
  std::set<int64_t> unwanted_remotely;
  for (const CheckpointInfo& info : checkpoints_to_delete(timeline, options_.retention)) {
    unwanted_remotely.insert(info.step);
  }
  // The local steps this pass should copy (or, on a node-local root, copy its host's part of).
  std::vector<CheckpointInfo> due;
  for (const CheckpointInfo& info : timeline) {
    if (!is_s3_url(info.path.string()) && !held_remotely(info) &&
        !unwanted_remotely.count(info.step)) {
      due.push_back(info);
    }
  }
  // A remote directory other hosts may still be copying into: a step due here, or one newer
  // than this host has committed (its commit may lag another host's).
  const int64_t newest_local = local.empty() ? -1 : local.back().step;
  const auto in_use = [&](int64_t step) {
    if (std::any_of(due.begin(), due.end(), [&](const auto& info) { return info.step == step; })) {
      return true;
    }
    return role_ == DrainRole::kHostCoordinator && step > newest_local;
  };
  if (deletes && options_.drain_lease.count() > 0) {
    // With the lease, no other job uploads here; on a shared root no other rank does either.
    abort_leftover_uploads(
        [&](int64_t step) { return role_ == DrainRole::kHostCoordinator && in_use(step); });
  }

  // Abandoned remote steps the timeline has passed go first: a step of the new run replaces its
  // namesake, and none of them may ever be resumed from.
  if (deletes) {
    for (const CheckpointInfo& info : passed_abandoned(all)) {
      if (!is_s3_url(info.path.string())) continue;  // local: pruned below
      remove_logged(info.step, "abandoned");
      remote_save_ids.erase(info.step);
      incomplete.erase(info.step);
    }
  }
  // The host parts this process copied of steps no longer due (committed, or gone) are done.
  for (auto part = copied_parts_.begin(); part != copied_parts_.end();) {
    const bool still_due = std::any_of(due.begin(), due.end(), [&](const CheckpointInfo& info) {
      return info.step == part->first;
    });
    part = still_due ? std::next(part) : copied_parts_.erase(part);
  }
  // A step that fails is retried by later passes, after a backoff; the steps after it go on.
  std::exception_ptr first_failure;
  std::string waits;  // what the steps of other hosts wait for
  bool waiting_for_hosts = false;
  for (const CheckpointInfo& info : due) {
    const auto failed = failing_.find(info.step);
    if (failed != failing_.end() && !retry_failed_now &&
        SteadyClock::now() < failed->second.next_try) {
      continue;
    }
    std::exception_ptr failure;
    if (role_ == DrainRole::kWholeSteps) {
      failure = upload_or_back_off(info);
      if (!failure) remote_save_ids[info.step] = info.save_id;
    } else if (remote_save_ids.count(info.step) != 0 && role_ == DrainRole::kHostFiles) {
      // Another save of the step is complete remotely: the coordinator replaces it first.
      waits += " step " + std::to_string(info.step) + ": the store holds another save of it;";
    } else {
      if (remote_save_ids.count(info.step) != 0) {
        remove_logged(info.step, "replaced by another save of the step");
        remote_save_ids.erase(info.step);
        incomplete.erase(info.step);
      }
      std::string waiting;
      failure = with_backoff(info, [&] { waiting = copy_host_part(info, incomplete[info.step]); });
      if (!failure && waiting.empty() && role_ == DrainRole::kHostCoordinator) {
        remote_save_ids[info.step] = info.save_id;
      }
      if (!failure && !waiting.empty()) {
        waits += " step " + std::to_string(info.step) + ": " + waiting + ";";
        waiting_for_hosts = true;
      }
    }
    if (failure && !first_failure) first_failure = failure;
  }
  waiting_for_hosts_ = waiting_for_hosts && role_ == DrainRole::kHostCoordinator;
  if (deletes) {
    for (const CheckpointInfo& info : remote) {
      if (unwanted_remotely.count(info.step) && held_remotely(info)) {
        remove_logged(info.step, "kept by no policy");
      }
    }
    // What a copy or a deletion cut short left (no `.metadata`, or files it names missing),
    // unless a copy of the step is due (this pass made it, or a later pass will).
    for (const auto& [step, objects] : incomplete) {
      if (!in_use(step)) remove_logged(step, "incomplete: left by a copy or a deletion cut short");
    }
  }
  // Locally: what the local policy does not keep, once the remote holds it (or would not keep
  // it either), and the abandoned steps the timeline has passed.
  prune_checkpoints(local, local_policy, sync_files, log_, remote, [&](const CheckpointInfo& info) {
    return held_remotely(info) || unwanted_remotely.count(info.step) != 0;
  });
  std::vector<int64_t> waiting;
  for (const CheckpointInfo& info : due) {
    if (!held_remotely(info)) waiting.push_back(info.step);
  }
  record_backlog(waiting, first_failure, waits);
  if (first_failure) std::rethrow_exception(first_failure);
}

std::exception_ptr RemoteTier::upload_or_back_off(const CheckpointInfo& info) {
  return with_backoff(info, [&] {
    const auto start = SteadyClock::now();
    const std::string url = step_url(info.step);
    log_.begin("drain", "upload", info.step, url);
    const int64_t bytes = upload(info);
    log_.record("drain", "upload", info.step, bytes, seconds_since(start), url);
  });
}

std::exception_ptr RemoteTier::with_backoff(const CheckpointInfo& info,
                                            const std::function<void()>& copy) {
  try {
    copy();
    failing_.erase(info.step);
    return nullptr;
  } catch (...) {
    StepFailures& failures = failing_[info.step];
    ++failures.count;
    const auto wait = std::min<std::chrono::seconds>(
        kFirstRetryWait * (int64_t{1} << std::min(failures.count - 1, 16)), kLongestRetryWait);
    failures.next_try = SteadyClock::now() + wait;
    logger().error(
        "copying step {} to {} failed ({} in a row; it stays local, the next pass tries it no "
        "sooner than in {} s, or wait_for_remote() at once; newer steps go on): {}",
        info.step, step_url(info.step), failures.count, wait.count(),
        exception_message(std::current_exception()));
    return std::current_exception();
  }
}

void RemoteTier::record_backlog(const std::vector<int64_t>& waiting,
                                const std::exception_ptr& failure, const std::string& waits) {
  std::string text;
  if (!waiting.empty()) {
    std::string steps;
    for (const int64_t step : waiting) steps += (steps.empty() ? "" : ", ") + std::to_string(step);
    text = std::to_string(waiting.size()) + " step(s) (" + steps + ") wait for the drain to " +
           prefix_.url() +
           (failure ? " (its last failure: " + exception_message(failure) + ")" : std::string()) +
           (waits.empty() ? std::string() : " (" + waits.substr(1, waits.size() - 2) + ")");
  }
  const std::lock_guard<std::mutex> lock(backlog_mutex_);
  backlog_ = std::move(text);
}

std::string RemoteTier::backlog() const {
  const std::lock_guard<std::mutex> lock(backlog_mutex_);
  return backlog_;
}

void RemoteTier::abort_leftover_uploads(const std::function<bool(int64_t step)>& in_use) {
  try {
    const int aborted = prefix_.abort_uploads(directory_prefix(), [&](const std::string& name) {
      const std::optional<int64_t> step = step_of_directory_name(name.substr(0, name.find('/')));
      return step && in_use(*step);
    });
    if (aborted > 0) {
      logger().info("aborted {} multipart upload(s) under {} that a killed drain left", aborted,
                    prefix_.url());
    }
  } catch (const CheckpointError& e) {
    if (!uploads_unlisted_) {
      logger().warn(
          "cannot list the multipart uploads under {} ({}); the parts of uploads a killed drain "
          "left stay stored until a lifecycle rule (AbortIncompleteMultipartUpload) removes them",
          prefix_.url(), e.what());
    }
    uploads_unlisted_ = true;
  }
}

void RemoteTier::remove_logged(int64_t step, const char* why) {
  const auto start = SteadyClock::now();
  const std::string url = step_url(step);
  log_.begin("drain", "delete", step, url);
  remove(step);
  log_.record("drain", "delete", step, 0, seconds_since(start), url);
  logger().info("deleted remote step {} ({}): {}", step, why, url);
}

int64_t RemoteTier::upload(const CheckpointInfo& info) {
  forget(info.step);
  const std::string directory = directory_of(info.step) + "/";
  // What an interrupted drain of this step left: objects of another layout would linger.
  for (const S3ObjectEntry& object : prefix_.list(directory)) prefix_.remove(object.name);
  // Every file but `.metadata`, files_at_once at a time; then `.metadata`: its presence is the
  // commit; then Megatron's own commit, which Megatron writes after DCP's.
  std::vector<std::string> names = files_before_metadata(info.path, megatron());
  upload_files(info.path, names, directory);
  if (!fs::exists(info.path / kCheckpointInfoFile)) {
    // A step Megatron-LM saved itself has no manifest of dcpp's: its copy gets one, from what the
    // local listing found (step, bytes; no save identity), without which the store's copy would
    // never be complete, and copied again by every pass.
    prefix_.write(directory + kCheckpointInfoFile, checkpoint_info_to_json(info));
  }
  std::vector<std::string> commits{kMetadataFile};
  if (megatron()) commits.push_back(kMegatronConfigFile);
  for (const std::string& commit : commits) upload_file(info.path / commit, directory + commit);
  names.insert(names.end(), commits.begin(), commits.end());
  int64_t bytes = 0;
  for (const std::string& name : names) {
    bytes += static_cast<int64_t>(fs::file_size(info.path / name));
  }
  logger().info("copied step {} to {} ({} bytes)", info.step, step_url(info.step), bytes);
  return bytes;
}

void RemoteTier::upload_files(const fs::path& directory, const std::vector<std::string>& names,
                              const std::string& remote_directory) {
  std::atomic<size_t> next{0};
  std::mutex failure_mutex;
  std::exception_ptr failure;
  const auto upload_some = [&] {
    for (size_t n = next++; n < names.size(); n = next++) {
      {
        const std::lock_guard<std::mutex> lock(failure_mutex);
        if (failure) return;  // the step fails: no point sending more
      }
      try {
        upload_file(directory / names[n], remote_directory + names[n]);
      } catch (...) {
        const std::lock_guard<std::mutex> lock(failure_mutex);
        if (!failure) failure = std::current_exception();
      }
    }
  };
  const size_t workers =
      std::min(names.size(), static_cast<size_t>(std::max(1, options_.files_at_once)));
  std::vector<std::thread> helpers;
  for (size_t t = 1; t < workers; ++t) helpers.emplace_back(upload_some);
  upload_some();
  for (std::thread& helper : helpers) helper.join();
  if (failure) std::rethrow_exception(failure);
}

void RemoteTier::upload_file(const fs::path& source, const std::string& name) {
  const uint32_t sent = prefix_.upload_file(source, name);
  if (!options_.verify) return;
  const uint32_t stored = prefix_.crc32_of(name);
  if (stored != sent) {
    const fs::path file = fs::path(name).filename();
    if (file == kMetadataFile || (megatron() && file == kMegatronConfigFile)) prefix_.remove(name);
    throw CheckpointError(ErrorKind::kCorrupt,
                          prefix_.url_of(name) + " does not hold the bytes of '" + source.string() +
                              "' that were uploaded (CRC-32 " + std::to_string(stored) +
                              ", expected " + std::to_string(sent) +
                              "); the step stays incomplete remotely and the next drain "
                              "uploads it again");
  }
}

void RemoteTier::remove(int64_t step) {
  forget(step);
  const std::string directory = directory_of(step) + "/";
  if (megatron()) prefix_.remove(directory + kMegatronConfigFile);
  prefix_.remove(directory + kMetadataFile);
  for (const S3ObjectEntry& object : prefix_.list(directory)) prefix_.remove(object.name);
}

}  // namespace dcpp::detail
