// CheckpointManager::restore: which checkpoint (a given path, a given step, or the latest complete
// one of the root and the remote tier, chosen by the coordinator and broadcast so that every rank
// loads the same one), then the load into the caller's state, in place, leaving out the excluded
// keys.

#include "checkpoint_info_json.h"
#include "checkpoint_manager_impl.h"
#include "core/logging.h"
#include "local_steps.h"
#include "plugin/megatron_tracker.h"
#include "rank_agreement.h"
#include "state_tools.h"
#include "stopwatch.h"

#include <dcpp/checkpoint/checkpointer.h>
#include <dcpp/core/checkpoint_error.h>
#include <dcpp/state_dict/stateful_swap.h>
#include <dcpp/storage/s3_deadline.h>
#include <dcpp/storage/s3_storage.h>

#include <algorithm>
#include <set>
#include <string>

namespace dcpp {
namespace fs = std::filesystem;
using detail::seconds_since;
using detail::SteadyClock;

namespace {

// Throws, listing the steps of the complete checkpoints under `root`, unless `path` is complete.
void require_complete(const fs::path& path, const fs::path& root, int rank) {
  if (fs::exists(path / ".metadata")) return;
  std::string steps;
  for (const CheckpointInfo& info : list_checkpoints(root)) {
    steps += (steps.empty() ? "" : ", ") + std::to_string(info.step);
  }
  throw CheckpointError(
      ErrorKind::kNotFound,
      "cannot resume from '" + path.string() + "' on rank " + std::to_string(rank) +
          ": it is not a complete checkpoint (no .metadata); " +
          (steps.empty()
               ? "there is no complete checkpoint under '" + root.string() + "'"
               : "the complete checkpoints under '" + root.string() + "' are of steps " + steps));
}

// The checkpoint of `timeline` (resumable, ascending by step, non-empty) that a resume without a
// step loads: the newest, unless Megatron-LM's tracker in `root` names an older one of it (a
// rollback made by hand, which Megatron-LM's own --load would honour), then that one, with a
// warning. A tracker naming no checkpoint of the timeline is logged and the newest restored.
const CheckpointInfo& tracker_choice(const std::vector<CheckpointInfo>& timeline,
                                     const fs::path& root) {
  const CheckpointInfo& newest = timeline.back();
  const std::optional<detail::MegatronTracker> tracker = detail::read_megatron_tracker(root);
  if (!tracker || (tracker->iteration && *tracker->iteration == newest.step)) return newest;
  const std::string file = detail::megatron_tracker_path(root).string();
  if (!tracker->iteration) {
    detail::logger().warn(
        "{} names no iteration ({}): restoring the newest complete iteration, {} ({})", file,
        tracker->problem, newest.step, newest.path.string());
    return newest;
  }
  const int64_t named = *tracker->iteration;
  const auto found = std::find_if(timeline.rbegin(), timeline.rend(),
                                  [&](const CheckpointInfo& info) { return info.step == named; });
  if (found == timeline.rend()) {
    detail::logger().warn(
        "{} names iteration {}, which is no complete checkpoint this job may resume from: "
        "restoring the newest complete iteration, {} ({})",
        file, named, newest.step, newest.path.string());
    return newest;
  }
  if (named > newest.step) return newest;  // not reached: the newest is the timeline's last
  detail::logger().warn(
      "{} names iteration {}, older than the newest complete one, {}: restoring iteration {} "
      "({}), as Megatron-LM's --load does (a rollback); to resume from {}, write {} into it or "
      "remove it",
      file, named, newest.step, named, found->path.string(), newest.step, newest.step);
  return *found;
}

}  // namespace

std::vector<CheckpointInfo> CheckpointManager::Impl::all_checkpoints(bool* unreachable,
                                                                     std::string* reason) const {
  std::vector<CheckpointInfo> all = list_checkpoints(options.root);
  if (!remote) return all;
  try {
    std::optional<S3Deadline> bound;  // a restart's reads of the store
    if (unreachable != nullptr && options.remote.restart_timeout.count() > 0) {
      bound.emplace(options.remote.restart_timeout, "RemoteTierOptions::restart_timeout");
    }
    std::vector<CheckpointInfo> remote_steps = remote->list();
    all.insert(all.end(), remote_steps.begin(), remote_steps.end());
  } catch (const CheckpointError& e) {
    if (unreachable == nullptr || e.kind() != ErrorKind::kIo) throw;
    *unreachable = true;
    if (reason) *reason = e.what();
    detail::logger().warn(
        "the remote tier {} cannot be reached ({}); working with the local root '{}' alone: "
        "steps saved meanwhile drain when the store is back",
        options.remote.url, e.what(), options.root.string());
  }
  return all;
}

// resumable(all); with a node-local root, only the steps the remote tier holds, as its entries (a
// local step is one host's part of it).
std::vector<CheckpointInfo> CheckpointManager::Impl::restorable(
    const std::vector<CheckpointInfo>& all) const {
  std::vector<CheckpointInfo> timeline = detail::resumable(all);
  if (!options.node_local_root) return timeline;
  std::vector<CheckpointInfo> held;
  for (const CheckpointInfo& info : timeline) {
    const auto remote = std::find_if(all.begin(), all.end(), [&](const CheckpointInfo& c) {
      return is_s3_url(c.path.string()) && c.step == info.step && c.save_id == info.save_id;
    });
    if (remote != all.end()) held.push_back(*remote);
  }
  return held;
}

std::optional<CheckpointInfo> CheckpointManager::Impl::latest() const {
  bool unreachable = false;
  const std::vector<CheckpointInfo> timeline = restorable(all_checkpoints(&unreachable));
  if (timeline.empty()) return std::nullopt;
  return timeline.back();
}

// Collective: the checkpoint to load (a directory or a remote step's URL), its manifest and the
// lineage of the saves after it, or nullopt when there is nothing to resume from. The coordinator
// chooses (the given path, where step N is, or the latest), checks that a local one is complete and
// reads the manifest, and tells the others: their view of the root may lag behind (or be another
// host's disk), and only it lists the remote tier and reads a remote manifest. What fails there
// fails on every rank.
std::optional<CheckpointManager::Impl::Chosen> CheckpointManager::Impl::choose_checkpoint(
    const RestoreRequest& request, std::optional<int64_t> below) const {
  std::string chosen, manifest, error, next_lineage;
  ErrorKind kind = ErrorKind::kIo;
  if (is_coordinator()) {
    try {
      std::optional<S3Deadline> bound;  // the listing and a remote manifest's read
      if (remote && options.remote.restart_timeout.count() > 0) {
        bound.emplace(options.remote.restart_timeout, "RemoteTierOptions::restart_timeout");
      }
      bool unreachable = false;
      std::string unreachable_reason;
      const std::vector<CheckpointInfo> all = all_checkpoints(&unreachable, &unreachable_reason);
      if (unreachable && all.empty() && request.path.empty()) {
        throw CheckpointError(ErrorKind::kIo,
                              "the remote tier " + options.remote.url +
                                  " cannot be read and the root '" + options.root.string() +
                                  "' holds no checkpoint: whether to resume from the store or to "
                                  "start fresh cannot be told, so this job does neither (" +
                                  unreachable_reason + "); retry when the store is back");
      }
      const std::vector<CheckpointInfo> timeline = restorable(all);
      if (!request.path.empty()) {
        chosen = request.path.string();
      } else if (request.step) {
        // The resumable one of that step, else any (an abandoned step asked for by number),
        // else the local directory (whose absence require_complete explains).
        const auto of_step = [&](const std::vector<CheckpointInfo>& list) {
          return std::find_if(list.begin(), list.end(), [&](const CheckpointInfo& info) {
            return info.step == *request.step;
          });
        };
        if (const auto found = of_step(timeline); found != timeline.end()) {
          chosen = found->path.string();
        } else if (const auto any = of_step(all); any != all.end()) {
          chosen = any->path.string();
        } else {
          chosen = (options.root / step_directory_name(*request.step, options.step_names)).string();
        }
      } else if (!below && !timeline.empty()) {
        chosen = tracker_choice(timeline, options.root).path.string();
      } else {
        for (auto it = timeline.rbegin(); it != timeline.rend(); ++it) {
          if (!below || it->step < *below) {
            chosen = it->path.string();
            break;
          }
        }
      }
      if (!chosen.empty()) {
        const CheckpointInfo info = manifest_of(chosen);
        manifest = detail::checkpoint_info_to_json(info);
        // Resuming while the store cannot be read: it may hold newer steps of this run, which
        // this resume must abandon rather than continue alongside (a fork).
        next_lineage =
            detail::encode_lineage(unreachable ? detail::fork_after_restore(info, all)
                                               : detail::lineage_after_restore(info, all));
        if (unreachable) {
          detail::logger().warn(
              "resuming from step {} of the local root '{}' while the remote tier {} cannot be "
              "read ({}): the steps it may hold after step {} are left behind (this run forks)",
              info.step, options.root.string(), options.remote.url, unreachable_reason, info.step);
        }
      }
    } catch (const CheckpointError& e) {
      error = e.what();
      kind = e.kind();
    } catch (const std::exception& e) {
      error = e.what();
    }
  }
  error = detail::broadcast_text_from(group, error, options.ranks.coordinator_rank);
  if (!error.empty()) {
    kind = static_cast<ErrorKind>(
        detail::broadcast_from(group, static_cast<int64_t>(kind), options.ranks.coordinator_rank));
    throw CheckpointError(kind, "choosing the checkpoint to resume from failed on rank " +
                                    std::to_string(options.ranks.coordinator_rank) + ": " + error);
  }
  chosen = detail::broadcast_text_from(group, chosen, options.ranks.coordinator_rank);
  if (chosen.empty()) return std::nullopt;
  manifest = detail::broadcast_text_from(group, manifest, options.ranks.coordinator_rank);
  next_lineage = detail::broadcast_text_from(group, next_lineage, options.ranks.coordinator_rank);
  Chosen result{detail::checkpoint_info_from_json(manifest, "the coordinator's manifest"),
                detail::decode_lineage(next_lineage)};
  result.info.path = chosen;
  return result;
}

// Coordinator: the manifest of the checkpoint at `path` (a remote step's URL or a directory);
// throws naming the complete checkpoints of the root when a local one is not complete.
CheckpointInfo CheckpointManager::Impl::manifest_of(const std::string& path) const {
  // A remote step's load fails with kNotFound naming its `.metadata` when it is incomplete.
  if (is_s3_url(path)) return detail::read_remote_checkpoint_info(path, options.remote.s3);
  require_complete(path, options.root, rank);
  if (fs::exists(fs::path(path) / kCheckpointInfoFile)) return read_checkpoint_info(path);
  return detail::unmanaged_checkpoint_info(path);  // a plain DCP checkpoint, or Megatron-LM's
}

std::optional<CheckpointInfo> CheckpointManager::Impl::restore(StateDict& state,
                                                               const RestoreRequest& request) {
  wait_for_memory_copy();  // the state is about to change, and the slots to be read
  if (options.node_local_root && remote) {
    // A resume reads from the store: the steps every host committed go up first (collective on
    // several ranks: settle_hosts).
    try {
      drain_to_remote(false);
    } catch (const CheckpointError& e) {
      detail::logger().warn("restoring from the steps the store holds now: {}", e.what());
    }
  }
  // The memory tier first: a step asked for by number that every rank holds there is read from
  // there; else its newest, when no other tier holds a newer one.
  const bool memory_may_serve = memory && request.path.empty();
  std::string memory_failure;
  if (memory_may_serve && request.step) {
    if (auto restored = restore_from_memory(state, request, std::nullopt, &memory_failure)) {
      return restored;
    }
  }
  const std::optional<Chosen> chosen = choose_checkpoint(request);
  if (memory_may_serve && !request.step) {
    const std::optional<int64_t> newest_elsewhere =
        chosen ? std::optional<int64_t>(chosen->info.step) : std::nullopt;
    if (auto restored = restore_from_memory(state, request, newest_elsewhere, &memory_failure)) {
      return restored;
    }
  }
  if (!chosen) {
    if (!memory_failure.empty()) {
      throw CheckpointError(ErrorKind::kCorrupt,
                            "restoring from the memory tier failed (" + memory_failure +
                                ") and no other tier holds a checkpoint; the state may be "
                                "partly loaded: do not train on from it");
    }
    return std::nullopt;
  }
  std::optional<Chosen> loading = chosen;
  std::string failures;  // of the newer ones that failed to load
  for (;;) {
    try {
      load_chosen(state, request, *loading);
      break;
    } catch (const CheckpointError& e) {
      // dcpp::load failed on every rank; they fall back together or not at all (each rank's
      // error may be of another kind).
      const bool may_fall_back = request.fall_back && request.path.empty() && !request.step &&
                                 (e.kind() == ErrorKind::kCorrupt ||
                                  e.kind() == ErrorKind::kNotFound || e.kind() == ErrorKind::kIo);
      if (!detail::every_rank_ok(group, may_fall_back)) throw;
      const int64_t failed = loading->info.step;
      failures += (failures.empty() ? "" : "; ") + std::string("step ") + std::to_string(failed) +
                  ": " + e.what();
      loading = choose_checkpoint(request, failed);
      if (!loading) {
        throw CheckpointError(e.kind(), "no checkpoint could be restored (" + failures +
                                            "); the state may be partly loaded: do not train on "
                                            "from it (RestoreRequest::fall_back tried each older "
                                            "step)");
      }
      detail::logger().warn(
          "rank {}: step {} failed to load ({}); falling back to step {} ({}), which the saves "
          "after it fork from (RestoreRequest::fall_back)",
          rank, failed, e.what(), loading->info.step, loading->info.path.string());
    }
  }
  return loading->info;
}

void CheckpointManager::Impl::load_chosen(StateDict& state, const RestoreRequest& request,
                                          const Chosen& chosen) {
  const CheckpointInfo& info = chosen.info;
  const std::string path = info.path.string();
  StateDict target = state;  // shares tensors and Stateful objects with `state`
  const std::set<std::string> excluded(request.exclude_from_loading.begin(),
                                       request.exclude_from_loading.end());
  detail::erase_keys(target, excluded);
  log->begin("load", "plan", info.step, path);
  auto start = SteadyClock::now();
  const int64_t bytes = detail::tensor_bytes(resolve_statefuls(target));
  log->record("load", "plan", info.step, bytes, seconds_since(start), path);
  LoadOptions load_options;
  load_options.ranks.process_group = group;
  load_options.ranks.coordinator_rank = options.ranks.coordinator_rank;
  load_options.allow_partial_load = request.allow_partial_load;
  load_options.all_or_nothing = request.all_or_nothing;
  load_options.read_once = options.read_once;
  load_options.s3 = options.remote.s3;
  log->begin("load", "read", info.step, path);
  start = SteadyClock::now();
  dcpp::load(target, path, load_options);
  detail::copy_loaded_values(state, target);
  log->record("load", "read", info.step, bytes, seconds_since(start), path);
  lineage = chosen.saving;  // only now: a restore that failed forks nothing
}

std::optional<CheckpointInfo> CheckpointManager::Impl::restore_from_memory(
    StateDict& state, const RestoreRequest& request, std::optional<int64_t> newest_elsewhere,
    std::string* failure) {
  const std::optional<int64_t> step = memory->agreed_step(request.step);
  if (!step || (newest_elsewhere && *newest_elsewhere > *step)) return std::nullopt;
  StateDict target = state;  // shares tensors and Stateful objects with `state`
  detail::erase_keys(target, std::set<std::string>(request.exclude_from_loading.begin(),
                                                   request.exclude_from_loading.end()));
  const std::string where = "memory tier '" + memory->job() + "'";
  log->begin("load", "read", *step, where);
  const auto start = SteadyClock::now();
  detail::MemoryTier::Loaded loaded;
  std::string error;
  try {
    loaded = memory->load(target, *step, request.allow_partial_load, request.all_or_nothing);
  } catch (const std::exception& e) {
    error = e.what();
  }
  error = detail::failures_of_ranks(group, rank, error);
  if (!error.empty()) {
    detail::logger().warn("restoring step {} from the {} failed ({}); reading the other tiers",
                          *step, where, error);
    *failure = error;
    return std::nullopt;
  }
  detail::copy_loaded_values(state, target);
  log->record("load", "read", *step, detail::tensor_bytes(resolve_statefuls(target)),
              seconds_since(start), where);
  const CheckpointInfo& info = loaded.info;
  detail::logger().info("rank {} restored step {} from the {}: {}", rank, *step, where,
                        loaded.source);
  // The lineage of the saves that follow, as after any restore: the coordinator compares the
  // step with what the other tiers hold.
  std::string next_lineage;
  if (is_coordinator()) {
    try {
      bool unreachable = false;
      const std::vector<CheckpointInfo> all = all_checkpoints(&unreachable);
      next_lineage = detail::encode_lineage(unreachable ? detail::fork_after_restore(info, all)
                                                        : detail::lineage_after_restore(info, all));
    } catch (const std::exception& e) {
      detail::logger().warn(
          "the tiers could not be listed after the restore from memory ({}); "
          "the saves continue its run",
          e.what());
      next_lineage = detail::encode_lineage(detail::Lineage{info.generation, info.branched_from});
    }
  }
  lineage = detail::decode_lineage(
      detail::broadcast_text_from(group, next_lineage, options.ranks.coordinator_rank));
  return info;
}

}  // namespace dcpp
