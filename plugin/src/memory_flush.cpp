// flush_memory_tier: the memory tier's newest step committed to disk from outside the job
// (memory_flush.h), for dcpp-launch and `dcpp flush-memory`.

#include "checkpoint_commit.h"
#include "checkpoint_info_json.h"
#include "checkpoint_lineage.h"
#include "memory_tier.h"

#include <dcpp/core/checkpoint_error.h>
#include <dcpp/plugin/memory_flush.h>
#include <dcpp/storage/memory_slots.h>
#include <dcpp/storage/memory_step.h>

#include <algorithm>
#include <map>
#include <memory>

namespace dcpp {
namespace fs = std::filesystem;

MemoryFlushResult flush_memory_tier(const MemoryFlushOptions& options) {
  if (options.root.empty() || options.ranks < 1) {
    throw CheckpointError(ErrorKind::kUsage,
                          "flush_memory_tier needs a root and at least one rank");
  }
  const std::string job =
      detail::memory_job_name(MemoryTierOptions().with_job(options.job), options.root);
  // Each rank's steps on this host: in its own slots, or in the replicas other ranks keep.
  std::vector<std::unique_ptr<MemorySlots>> slots;
  std::vector<std::vector<MemoryStep>> held(static_cast<std::size_t>(options.ranks));
  for (const HeldSlots& regions : MemorySlots::on_this_host(job)) {
    slots.push_back(std::make_unique<MemorySlots>(job, regions.rank, 1, 1, regions.holder));
    if (regions.rank >= options.ranks) continue;
    for (MemoryStep& step : slots.back()->complete_steps()) {
      held[static_cast<std::size_t>(regions.rank)].push_back(std::move(step));
    }
  }
  const auto release = [&] {
    if (options.keep_regions) return;
    for (const auto& regions : slots) regions->release();
  };
  // The steps of which every rank has a copy, of the same save, with their manifests.
  std::vector<std::vector<MemoryStep>> complete;
  std::vector<CheckpointInfo> all;  // their manifests, then the root's checkpoints
  std::string other_job;            // why the newest step of another world size is not taken
  int64_t newest_of_other_job = 0;
  for (const MemoryStep& candidate : held.front()) {
    std::vector<MemoryStep> copies;
    for (const std::vector<MemoryStep>& rank : held) {
      const auto same = std::find_if(rank.begin(), rank.end(), [&](const MemoryStep& step) {
        return step.step == candidate.step && step.save_id == candidate.save_id;
      });
      if (same == rank.end()) break;
      copies.push_back(*same);
    }
    if (copies.size() != held.size()) continue;
    const MemoryStepReader reader(copies);
    const std::map<int, int> worlds = reader.world_sizes();
    const auto other_world = std::find_if(
        worlds.begin(), worlds.end(),
        [&](const std::pair<const int, int>& rank) { return rank.second != options.ranks; });
    if (other_world != worlds.end()) {
      // Another job's (of another size, on this job's regions): refused below if it is all
      // there is.
      if (other_job.empty() || candidate.step > newest_of_other_job) {
        newest_of_other_job = candidate.step;
        other_job = "memory tier '" + job + "': step " + std::to_string(candidate.step) +
                    " was saved by a job of " + std::to_string(other_world->second) +
                    " ranks, and " + std::to_string(options.ranks) + " were named";
      }
      continue;
    }
    CheckpointInfo manifest =
        detail::checkpoint_info_from_json(reader.manifests().begin()->second, candidate.region);
    manifest.path = "/dev/shm" + candidate.region;
    complete.push_back(std::move(copies));
    all.push_back(std::move(manifest));
  }
  MemoryFlushResult result;
  if (complete.empty() && !other_job.empty()) throw CheckpointError(ErrorKind::kUsage, other_job);
  if (complete.empty()) {
    result.message = "memory tier '" + job + "': no step of which this host holds all " +
                     std::to_string(options.ranks) +
                     " ranks' copies (their own slots or replicas); nothing written";
    return result;
  }
  const std::size_t in_memory = all.size();
  const std::vector<CheckpointInfo> stored = list_checkpoints(options.root);
  all.insert(all.end(), stored.begin(), stored.end());
  // The newest step a resume may take, lineage and all (checkpoint_lineage.h): a memory step of
  // a run that a rollback abandoned is never written, and one of the run that abandoned newer
  // stored steps is.
  const std::vector<CheckpointInfo> timeline = detail::resumable(all);
  // Not empty: memory's steps are in `all`, and the newest of them is never abandoned.
  const auto newest =
      std::find_if(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(in_memory),
                   [&](const CheckpointInfo& info) { return info.path == timeline.back().path; });
  if (newest == all.begin() + static_cast<std::ptrdiff_t>(in_memory)) {
    result.message = "memory tier '" + job + "': its steps are no newer than step " +
                     std::to_string(timeline.back().step) + " under '" + options.root.string() +
                     "', the newest a resume may take (of the run the others abandoned, or "
                     "older); nothing written";
    release();
    return result;
  }
  const std::vector<MemoryStep>& chosen = complete[static_cast<std::size_t>(newest - all.begin())];
  const int64_t step = chosen.front().step;
  const CheckpointInfo manifest = detail::checkpoint_info_from_json(
      MemoryStepReader(chosen).manifests().begin()->second, chosen.front().region);
  const fs::path final_path = options.root / step_directory_name(step);
  const fs::path incomplete = detail::incomplete_directory(final_path);
  fs::remove_all(incomplete);
  write_memory_steps_as_checkpoint(chosen, incomplete, options.sync_files);
  detail::commit_checkpoint(incomplete, final_path, manifest, options.sync_files);
  result.written = read_checkpoint_info(final_path);
  result.message = "memory tier '" + job + "': step " + std::to_string(step) + " of " +
                   std::to_string(options.ranks) + " ranks written to '" + final_path.string() +
                   "'";
  release();
  return result;
}

}  // namespace dcpp
