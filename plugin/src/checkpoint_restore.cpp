// CheckpointManager::restore: which checkpoint (a given path, a given step, or the latest complete
// one of the root and the remote tier, chosen by the coordinator and broadcast so that every rank
// loads the same one), then the load into the caller's state, in place, leaving out the excluded
// keys.

#include "checkpoint_info_json.h"
#include "checkpoint_manager_impl.h"
#include "rank_agreement.h"
#include "state_tools.h"
#include "stopwatch.h"

#include <dcpp/checkpoint/checkpointer.h>
#include <dcpp/core/checkpoint_error.h>
#include <dcpp/state_dict/stateful_swap.h>
#include <dcpp/storage/s3_storage.h>

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

}  // namespace

std::optional<CheckpointInfo> CheckpointManager::Impl::latest() const {
  std::optional<CheckpointInfo> newest = latest_checkpoint(options.root);
  if (remote) {
    const std::vector<CheckpointInfo> remote_steps = remote->list();
    if (!remote_steps.empty() && (!newest || remote_steps.back().step > newest->step)) {
      newest = remote_steps.back();
    }
  }
  return newest;
}

// Collective: the checkpoint to load (a directory or a remote step's URL), or nullopt when there
// is nothing to resume from. The coordinator chooses (the latest, or where step N is) and tells
// the others: their view of the root may lag behind, and only it lists the remote tier.
std::optional<std::string> CheckpointManager::Impl::choose_checkpoint(
    const RestoreRequest& request) const {
  const fs::path& root = options.root;
  if (!request.path.empty()) return request.path.string();
  std::string chosen, error;
  if (is_coordinator()) {
    try {
      if (request.step) {
        const fs::path local = root / step_directory_name(*request.step);
        chosen = local.string();
        if (remote && !fs::exists(local / ".metadata")) {
          for (const CheckpointInfo& info : remote->list()) {
            if (info.step == *request.step) chosen = info.path.string();
          }
        }
      } else if (const std::optional<CheckpointInfo> newest = latest()) {
        chosen = newest->path.string();
      }
    } catch (const std::exception& e) {
      error = e.what();
    }
  }
  error = detail::broadcast_text_from(group, error, options.ranks.coordinator_rank);
  if (!error.empty()) {
    throw CheckpointError(ErrorKind::kIo, "choosing the checkpoint to resume from failed on rank " +
                                              std::to_string(options.ranks.coordinator_rank) +
                                              ": " + error);
  }
  chosen = detail::broadcast_text_from(group, chosen, options.ranks.coordinator_rank);
  if (chosen.empty()) return std::nullopt;
  return chosen;
}

std::optional<CheckpointInfo> CheckpointManager::Impl::restore(StateDict& state,
                                                               const RestoreRequest& request) {
  const std::optional<std::string> chosen = choose_checkpoint(request);
  if (!chosen) return std::nullopt;
  const std::string& path = *chosen;
  const bool from_remote = is_s3_url(path);
  // A remote step's load fails with kNotFound naming its `.metadata` when it is not complete.
  if (!from_remote) require_complete(path, options.root, rank);
  StateDict target = state;  // shares tensors and Stateful objects with `state`
  const std::set<std::string> excluded(request.exclude_from_loading.begin(),
                                       request.exclude_from_loading.end());
  detail::erase_keys(target, excluded);
  CheckpointInfo info;
  if (from_remote) {
    info = detail::read_remote_checkpoint_info(path, options.remote.s3);
  } else if (fs::exists(fs::path(path) / kCheckpointInfoFile)) {
    info = read_checkpoint_info(path);
  } else {
    info.path = path;  // a plain DCP checkpoint: no manifest
  }
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
  return info;
}

}  // namespace dcpp
