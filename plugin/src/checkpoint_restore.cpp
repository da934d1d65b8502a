// CheckpointManager::restore: which checkpoint (a given path, a given step, or the latest complete
// one, chosen by the coordinator and broadcast so that every rank loads the same one), then the
// load into the caller's state, in place, leaving out the excluded keys.

#include "checkpoint_info_json.h"
#include "checkpoint_manager_impl.h"
#include "rank_agreement.h"
#include "state_tools.h"
#include "stopwatch.h"

#include <dcpp/checkpoint/checkpointer.h>
#include <dcpp/core/checkpoint_error.h>
#include <dcpp/state_dict/stateful_swap.h>

#include <set>
#include <string>

namespace dcpp {
namespace fs = std::filesystem;
using detail::seconds_since;
using detail::SteadyClock;

namespace {

// Collective when `request` names neither a path nor a step: the directory to load, or nullopt
// when there is nothing to resume from. The latest complete checkpoint is the coordinator's
// choice, broadcast to the others (their view of the root may lag behind).
std::optional<fs::path> choose_checkpoint(const RestoreRequest& request, const fs::path& root,
                                          const c10::intrusive_ptr<c10d::ProcessGroup>& group,
                                          bool is_coordinator, int coordinator_rank) {
  if (!request.path.empty()) return request.path;
  if (request.step) return root / step_directory_name(*request.step);
  int64_t step = -1;
  if (is_coordinator) {
    if (auto latest = latest_checkpoint(root)) step = latest->step;
  }
  step = detail::broadcast_from(group, step, coordinator_rank);
  if (step < 0) return std::nullopt;
  return root / step_directory_name(step);
}

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

std::optional<CheckpointInfo> CheckpointManager::Impl::restore(StateDict& state,
                                                               const RestoreRequest& request) {
  const std::optional<fs::path> chosen = choose_checkpoint(
      request, options.root, group, is_coordinator(), options.ranks.coordinator_rank);
  if (!chosen) return std::nullopt;
  const fs::path& path = *chosen;
  require_complete(path, options.root, rank);
  StateDict target = state;  // shares tensors and Stateful objects with `state`
  const std::set<std::string> excluded(request.exclude_from_loading.begin(),
                                       request.exclude_from_loading.end());
  detail::erase_keys(target, excluded);
  CheckpointInfo info;
  if (fs::exists(path / kCheckpointInfoFile)) {
    info = read_checkpoint_info(path);
  } else {
    info.path = path;  // a plain DCP checkpoint: no manifest
  }
  log->begin("load", "plan", info.step, path.string());
  auto start = SteadyClock::now();
  const int64_t bytes = detail::tensor_bytes(resolve_statefuls(target));
  log->record("load", "plan", info.step, bytes, seconds_since(start), path.string());
  LoadOptions load_options;
  load_options.ranks.process_group = group;
  load_options.ranks.coordinator_rank = options.ranks.coordinator_rank;
  load_options.allow_partial_load = request.allow_partial_load;
  load_options.all_or_nothing = request.all_or_nothing;
  load_options.read_once = options.read_once;
  log->begin("load", "read", info.step, path.string());
  start = SteadyClock::now();
  dcpp::load(target, path, load_options);
  detail::copy_loaded_values(state, target);
  log->record("load", "read", info.step, bytes, seconds_since(start), path.string());
  return info;
}

}  // namespace dcpp
