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
    if (detail::is_memory_tier_path(info.path)) {
      held.push_back(info);
      continue;
    }
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
    const RestoreRequest& request, std::optional<int64_t> below,
    const std::vector<CheckpointInfo>& in_memory, const std::set<std::string>& failed) const {
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
      // The memory tier's steps first: of two checkpoints of one step, the first is read.
      std::vector<CheckpointInfo> all = in_memory;
      const std::vector<CheckpointInfo> stored = all_checkpoints(&unreachable, &unreachable_reason);
      all.insert(all.end(), stored.begin(), stored.end());
      if (unreachable && all.empty() && request.path.empty()) {
        throw CheckpointError(ErrorKind::kIo,
                              "the remote tier " + options.remote.url +
                                  " cannot be read and the root '" + options.root.string() +
                                  "' holds no checkpoint: whether to resume from the store or to "
                                  "start fresh cannot be told, so this job does neither (" +
                                  unreachable_reason + "); retry when the store is back");
      }
      std::vector<CheckpointInfo> timeline = restorable(all);
      const auto has_failed = [&](const CheckpointInfo& info) {
        return failed.count(info.path.string()) != 0;
      };
      timeline.erase(std::remove_if(timeline.begin(), timeline.end(), has_failed), timeline.end());
      if (!request.path.empty()) {
        chosen = request.path.string();
      } else if (request.step) {
        // The resumable one of that step, else any (an abandoned step asked for by number),
        // else the local directory (whose absence require_complete explains).
        const auto of_step = [&](const std::vector<CheckpointInfo>& list) {
          return std::find_if(list.begin(), list.end(), [&](const CheckpointInfo& info) {
            return info.step == *request.step && !has_failed(info);
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
        const auto memory_step =
            std::find_if(in_memory.begin(), in_memory.end(),
                         [&](const CheckpointInfo& info) { return info.path.string() == chosen; });
        // A memory step: the manager's manifest is in it; its description has what the lineage
        // needs (which step, of which save, generation and fork).
        const CheckpointInfo info =
            memory_step != in_memory.end() ? *memory_step : manifest_of(chosen);
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
  // The memory tier's complete steps compete with the other tiers' checkpoints, lineage and all
  // (checkpoint_lineage.h): a memory step of an abandoned run is never resumed, and a memory step
  // of the run that abandoned older disk steps wins over them; of one step, memory's is read.
  std::vector<CheckpointInfo> in_memory;
  if (memory && request.path.empty()) {
    memory->start_restore();
    in_memory = memory->complete_steps();
  }
  std::string memory_failure;
  std::set<std::string> failed_in_memory;  // memory steps that did not load: not chosen again
  std::optional<Chosen> loading =
      choose_checkpoint(request, std::nullopt, in_memory, failed_in_memory);
  std::string failures;  // of the newer stored ones that failed to load
  for (;;) {
    if (loading && detail::is_memory_tier_path(loading->info.path)) {
      bool corrupted = false;
      if (auto restored =
              restore_from_memory(state, request, *loading, &memory_failure, &corrupted)) {
        return restored;
      }
      // A corrupted copy is passed over (a replica may hold it whole); a step that did not
      // load is not chosen again. Either way the next choice is made afresh.
      if (corrupted) {
        in_memory = memory->complete_steps();
      } else {
        failed_in_memory.insert(loading->info.path.string());
      }
      loading = choose_checkpoint(request, std::nullopt, in_memory, failed_in_memory);
      continue;
    }
    if (!loading) {
      if (!memory_failure.empty()) {
        throw CheckpointError(ErrorKind::kCorrupt,
                              "restoring from the memory tier failed (" + memory_failure +
                                  ") and no other tier holds a checkpoint; the state may be "
                                  "partly loaded: do not train on from it");
      }
      return std::nullopt;
    }
    try {
      load_chosen(state, request, *loading);
      return loading->info;
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
      loading = choose_checkpoint(request, failed, in_memory, failed_in_memory);
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
    StateDict& state, const RestoreRequest& request, const Chosen& chosen, std::string* failure,
    bool* corrupted) {
  const int64_t step = chosen.info.step;
  const std::string where = "memory tier '" + memory->job() + "'";
  memory->choose(chosen.info);
  StateDict target = state;  // shares tensors and Stateful objects with `state`
  detail::erase_keys(target, std::set<std::string>(request.exclude_from_loading.begin(),
                                                   request.exclude_from_loading.end()));
  log->begin("load", "read", step, where);
  const auto start = SteadyClock::now();
  detail::MemoryTier::Loaded loaded;
  std::string error;
  bool passed_over = false;
  try {
    loaded = memory->load(target, request.allow_partial_load, request.all_or_nothing, &passed_over);
  } catch (const std::exception& e) {
    error = e.what();
  }
  error = detail::failures_of_ranks(group, rank, error);
  *corrupted = !detail::every_rank_ok(group, !passed_over);
  if (!error.empty()) {
    detail::logger().warn("restoring step {} from the {} failed ({}); reading the other tiers",
                          step, where, error);
    *failure = error;
    return std::nullopt;
  }
  detail::copy_loaded_values(state, target);
  log->record("load", "read", step, detail::tensor_bytes(resolve_statefuls(target)),
              seconds_since(start), where);
  detail::logger().info("rank {} restored step {} from the {}: {}", rank, step, where,
                        loaded.source);
  lineage = chosen.saving;  // as after any restore: a fork when it is not the newest
  return loaded.info;
}

}  // namespace dcpp
