// flush_memory_tier: the memory tier's newest step committed to disk from outside the job
// (memory_flush.h), for dcpp-launch and `dcpp flush-memory`.

#include "checkpoint_commit.h"
#include "checkpoint_info_json.h"
#include "memory_tier.h"

#include <dcpp/core/checkpoint_error.h>
#include <dcpp/plugin/memory_flush.h>
#include <dcpp/storage/memory_slots.h>
#include <dcpp/storage/memory_step.h>

#include <algorithm>
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
  // The newest step of rank 0's that every rank has a copy of, of the same save.
  std::sort(held.front().begin(), held.front().end(),
            [](const MemoryStep& a, const MemoryStep& b) { return a.step > b.step; });
  std::vector<MemoryStep> chosen;
  for (const MemoryStep& candidate : held.front()) {
    chosen.clear();
    for (const std::vector<MemoryStep>& rank : held) {
      const auto same = std::find_if(rank.begin(), rank.end(), [&](const MemoryStep& step) {
        return step.step == candidate.step && step.save_id == candidate.save_id;
      });
      if (same == rank.end()) break;
      chosen.push_back(*same);
    }
    if (chosen.size() == held.size()) break;
  }
  MemoryFlushResult result;
  if (chosen.size() != held.size()) {
    result.message = "memory tier '" + job + "': no step of which this host holds all " +
                     std::to_string(options.ranks) +
                     " ranks' copies (their own slots or replicas); nothing written";
    return result;
  }
  const int64_t step = chosen.front().step;
  MemoryStepReader reader(chosen);
  for (const auto& [rank, world] : reader.world_sizes()) {
    if (world != options.ranks) {
      throw CheckpointError(ErrorKind::kUsage,
                            "memory tier '" + job + "': step " + std::to_string(step) +
                                " was saved by a job of " + std::to_string(world) + " ranks, and " +
                                std::to_string(options.ranks) + " were named");
    }
  }
  const std::optional<CheckpointInfo> newest = latest_checkpoint(options.root);
  if (newest && newest->step >= step) {
    result.message = "memory tier '" + job + "': its newest step " + std::to_string(step) +
                     " is no newer than step " + std::to_string(newest->step) + " under '" +
                     options.root.string() + "'; nothing written";
    release();
    return result;
  }
  CheckpointInfo manifest =
      detail::checkpoint_info_from_json(reader.manifests().begin()->second, chosen.front().region);
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
