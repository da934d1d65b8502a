// The CheckpointManager's memory tier: saves into this rank's slots, and the ranks' agreement on
// the step to resume from (memory_tier.h).

#include "memory_tier.h"

#include "checkpoint_info_json.h"
#include "checkpoint_lineage.h"
#include "core/logging.h"

#include <dcpp/storage/memory_step.h>

#include <dcpp/checkpoint/checkpointer.h>
#include <dcpp/core/checkpoint_error.h>

#include <sys/statvfs.h>

#include <cstdio>
#include <cstdlib>
#include <limits>
#include <system_error>

namespace dcpp::detail {
namespace fs = std::filesystem;

namespace {

// FNV-1a, 64 bits: a stable hash for names (not for security).
uint64_t fnv1a(const std::string& text) {
  uint64_t hash = 14695981039346656037ull;
  for (unsigned char c : text) {
    hash ^= c;
    hash *= 1099511628211ull;
  }
  return hash;
}

// What a save identity is compared as across ranks: a non-negative 62-bit hash of it.
int64_t save_id_key(const std::string& save_id) {
  return static_cast<int64_t>(fnv1a(save_id) >> 2);
}

// The ranks of this host: torchrun's and dcpp-launch's LOCAL_WORLD_SIZE, else 1.
int64_t local_ranks() {
  const char* value = std::getenv("LOCAL_WORLD_SIZE");
  const long long parsed = value != nullptr ? std::atoll(value) : 0;
  return parsed > 0 ? parsed : 1;
}

// This rank's reason why /dev/shm cannot hold two regions of steps of `max_bytes` for each of
// the host's ranks, counting the bytes `job`'s regions hold already (they are rewritten in place);
// "" when it can.
std::string shm_room_problem(const std::string& job, int64_t max_bytes) {
  struct statvfs status {};
  if (::statvfs("/dev/shm", &status) != 0) {
    return "/dev/shm cannot be examined: " + std::system_category().message(errno);
  }
  const uint64_t free_bytes = static_cast<uint64_t>(status.f_bavail) * status.f_frsize;
  uint64_t held = 0;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator("/dev/shm", error)) {
    if (entry.path().filename().string().rfind("dcpp." + job + ".", 0) == 0) {
      held += entry.file_size(error);
    }
  }
  const uint64_t needed = 2 * static_cast<uint64_t>(MemorySlots::region_bytes(max_bytes)) *
                          static_cast<uint64_t>(local_ranks());
  if (free_bytes + held >= needed) return "";
  const auto mib = [](uint64_t bytes) { return std::to_string(bytes >> 20) + " MiB"; };
  return "/dev/shm has " + mib(free_bytes) + " free and this job's regions hold " + mib(held) +
         "; two slots of " + mib(static_cast<uint64_t>(max_bytes)) + " for each of " +
         std::to_string(local_ranks()) + " ranks of this host (LOCAL_WORLD_SIZE) take " +
         mib(needed) +
         ": enlarge /dev/shm (a tmpfs: mount -o remount,size=...; in a container, --shm-size), or "
         "lower MemoryTierOptions::max_bytes_per_rank";
}

}  // namespace

std::string memory_job_name(const MemoryTierOptions& options, const fs::path& root) {
  if (!options.job.empty()) return options.job;
  std::error_code error;
  fs::path absolute = fs::absolute(root, error);
  if (error) absolute = root;
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx",
                static_cast<unsigned long long>(fnv1a(absolute.lexically_normal().string())));
  return std::string("root-") + hex;
}

bool is_memory_tier_path(const fs::path& path) {
  return path.string().rfind("/dev/shm/dcpp.", 0) == 0;
}

MemoryTier::MemoryTier(const MemoryTierOptions& options, const fs::path& root,
                       const ProcessGroupPtr& group, int rank, int world, int coordinator)
    : options_(options),
      job_(memory_job_name(options, root)),
      group_(group),
      rank_(rank),
      world_(world),
      coordinator_(coordinator),
      slots_(job_, rank,
             options.max_bytes_per_rank > 0 ? options.max_bytes_per_rank
                                            : std::numeric_limits<int64_t>::max(),
             options.copy_threads) {
  if (options.every_steps < 0 || options.max_bytes_per_rank < 0 || options.copy_threads < 1) {
    throw CheckpointError(ErrorKind::kUsage,
                          "MemoryTierOptions: every_steps and max_bytes_per_rank must not be "
                          "negative, and copy_threads must be at least 1");
  }
  run_token_ = broadcast_text_from(group, new_save_id(), coordinator);
  if (options.max_bytes_per_rank == 0) return;
  const std::string problems =
      failures_of_ranks(group, rank, shm_room_problem(job_, options.max_bytes_per_rank));
  if (!problems.empty()) {
    throw CheckpointError(ErrorKind::kIo,
                          "the memory tier does not fit (" + problems +
                              "); nothing was written, and the disk and remote tiers are "
                              "untouched");
  }
}

std::string MemoryTier::save_id_of(int64_t step) const {
  return run_token_ + "-" + std::to_string(step);
}

int64_t MemoryTier::save(const StateDict& resolved, const CheckpointInfo& manifest) {
  CheckpointInfo info = manifest;
  info.save_id = save_id_of(info.step);
  MemoryStepWriter writer(slots_, info.step, info.save_id, world_, checkpoint_info_to_json(info));
  dcpp::save(resolved, writer, SaveOptions().with_use_collectives(false).with_rank(rank_));
  return writer.data_bytes();
}

std::optional<int64_t> MemoryTier::agreed_step(std::optional<int64_t> wanted) const {
  // Each rank's complete steps of a job of this world size, as (step, save identity) pairs.
  std::vector<std::string> problems;
  std::vector<int64_t> mine(4, -1);
  std::size_t filled = 0;
  verified_ = slots_.complete_steps(&problems);
  for (const MemoryStep& step : verified_) {
    try {
      const int saved_world = MemoryStepReader({step}).world_sizes().begin()->second;
      if (saved_world != world_) {
        problems.push_back(step.region + ": step " + std::to_string(step.step) +
                           " was saved by a job of " + std::to_string(saved_world) +
                           " ranks; this one has " + std::to_string(world_));
        continue;
      }
    } catch (const CheckpointError& e) {
      problems.push_back(e.what());
      continue;
    }
    mine[2 * filled] = step.step;
    mine[2 * filled + 1] = save_id_key(step.save_id);
    ++filled;
  }
  for (const std::string& problem : problems) {
    logger().warn("memory tier, rank {}: {} (left out)", rank_, problem);
  }
  const std::vector<std::vector<int64_t>> all = vectors_of_ranks(group_, mine);
  const auto holds = [](const std::vector<int64_t>& steps, int64_t step, int64_t key) {
    return (steps[0] == step && steps[1] == key) || (steps[2] == step && steps[3] == key);
  };
  std::optional<int64_t> best;
  for (int i = 0; i < 2; ++i) {
    const int64_t step = all[0][2 * i], key = all[0][2 * i + 1];
    if (step < 0 || (wanted && step != *wanted) || (best && *best >= step)) continue;
    bool everywhere = true;
    for (const std::vector<int64_t>& steps : all)
      everywhere = everywhere && holds(steps, step, key);
    if (everywhere) best = step;
  }
  bool any_held = false;
  for (const std::vector<int64_t>& steps : all) any_held = any_held || steps[0] >= 0;
  if (!best && any_held && rank_ == coordinator_) {
    std::string held;
    for (std::size_t r = 0; r < all.size(); ++r) {
      held += (r == 0 ? "rank " : "; rank ") + std::to_string(r) + ":";
      for (int i = 0; i < 2; ++i) {
        if (all[r][2 * i] >= 0) held += " " + std::to_string(all[r][2 * i]);
      }
    }
    logger().info("memory tier '{}': no step that every rank holds{} ({})", job_,
                  wanted ? " as step " + std::to_string(*wanted) : std::string(), held);
  }
  return best;
}

CheckpointInfo MemoryTier::load(StateDict& target, int64_t step, bool allow_partial_load,
                                bool all_or_nothing) const {
  std::vector<MemoryStep> steps = std::move(verified_);
  verified_.clear();
  if (steps.empty()) steps = slots_.complete_steps();
  for (MemoryStep& held : steps) {
    if (held.step != step) continue;
    const std::string region = held.region;
    MemoryStepReader reader({std::move(held)});
    LoadOptions options;
    options.allow_partial_load = allow_partial_load;
    options.all_or_nothing = all_or_nothing;
    dcpp::load(target, reader, options);
    CheckpointInfo info = checkpoint_info_from_json(reader.manifests().begin()->second, region);
    info.path = fs::path("/dev/shm") / region.substr(1);
    return info;
  }
  throw CheckpointError(ErrorKind::kNotFound, "memory tier '" + job_ + "': rank " +
                                                  std::to_string(rank_) + " no longer holds step " +
                                                  std::to_string(step));
}

}  // namespace dcpp::detail
