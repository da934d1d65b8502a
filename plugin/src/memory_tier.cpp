// The CheckpointManager's memory tier: saves into this rank's slots, and the ranks' agreement on
// the step to resume from (memory_tier.h).

#include "memory_tier.h"

#include "checkpoint_info_json.h"
#include "checkpoint_lineage.h"
#include "core/caller_streams.h"
#include "core/exclusive_file_lock.h"
#include "core/logging.h"

#include <dcpp/storage/memory_step.h>

#include <dcpp/checkpoint/checkpointer.h>
#include <dcpp/core/checkpoint_error.h>

#include <sys/statvfs.h>

#include <cstdio>
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

// This rank's reason why /dev/shm cannot hold two regions of steps of `max_bytes` for each of
// the host's `local_ranks` ranks and for each of their `replicas` peers' replicas, counting the
// bytes `job`'s regions hold already (they are rewritten in place);
// "" when it can.
std::string shm_room_problem(const std::string& job, int64_t max_bytes, int replicas,
                             int64_t local_ranks) {
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
                          static_cast<uint64_t>(local_ranks) *
                          (1 + static_cast<uint64_t>(replicas));
  if (free_bytes + held >= needed) return "";
  const auto mib = [](uint64_t bytes) { return std::to_string(bytes >> 20) + " MiB"; };
  return "/dev/shm has " + mib(free_bytes) + " free and this job's regions hold " + mib(held) +
         "; two slots of " + mib(static_cast<uint64_t>(max_bytes)) + " for each of " +
         std::to_string(local_ranks) + " ranks of this host (LOCAL_WORLD_SIZE), and as many for " +
         std::to_string(replicas) + " replicas of each, take " + mib(needed) +
         ": enlarge /dev/shm (a tmpfs: mount -o remount,size=...; in a container, --shm-size), or "
         "lower MemoryTierOptions::max_bytes_per_rank";
}

}  // namespace

int64_t save_id_key(const std::string& save_id) {
  return static_cast<int64_t>(fnv1a(save_id) >> 2);
}

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
  if (options.replicas < 0) {
    throw CheckpointError(ErrorKind::kUsage, "MemoryTierOptions: replicas must not be negative");
  }
  run_token_ = broadcast_text_from(group, new_save_id(), coordinator);
  if (options.max_bytes_per_rank > 0) {
    const std::string problems =
        failures_of_ranks(group, rank,
                          shm_room_problem(job_, options.max_bytes_per_rank, options.replicas,
                                           ranks_per_host(options)));
    if (!problems.empty()) {
      throw CheckpointError(ErrorKind::kIo,
                            "the memory tier does not fit (" + problems +
                                "); nothing was written, and the disk and remote tiers are "
                                "untouched");
    }
  }
  if (options.replicas > 0) {
    replication_ = std::make_unique<MemoryReplication>(options, job_, rank, world,
                                                       options.max_bytes_per_rank > 0
                                                           ? options.max_bytes_per_rank
                                                           : std::numeric_limits<int64_t>::max());
  }
  if (options.copy_while_training) copier_ = std::make_unique<SerialWorker>();
}

MemoryTier::~MemoryTier() = default;

std::string MemoryTier::save_id_of(int64_t step) const {
  return run_token_ + "-" + std::to_string(step);
}

int64_t MemoryTier::save(const StateDict& resolved, const CheckpointInfo& manifest) {
  CheckpointInfo info = manifest;
  info.save_id = save_id_of(info.step);
  if (replication_) replication_->wait_for_room();
  int slot = -1;
  int64_t bytes = 0;
  try {
    MemoryStepWriter writer(slots_, info.step, info.save_id, world_, checkpoint_info_to_json(info),
                            &step_cache_);
    // A step of the structure of the one before (a training loop's) is written without planning.
    if (!writer.write_as_before(resolved, rank_)) {
      detail::logger().debug("memory step {}: planned in full (the first, or a new structure)",
                             info.step);
      dcpp::save(resolved, writer, SaveOptions().with_use_collectives(false).with_rank(rank_));
    }
    slot = writer.slot();
    bytes = writer.data_bytes();
  } catch (...) {
    run_empty_round();
    throw;
  }
  if (replication_) replication_->submit(slots_.written(slot));
  return bytes;
}

void MemoryTier::run_empty_round() {
  if (replication_) {
    replication_->wait_for_room();
    replication_->submit(std::nullopt);
  }
}

void MemoryTier::note_failed_save() {
  if (copier_) {
    copier_->post([this] { run_empty_round(); });
  } else {
    run_empty_round();
  }
}

void MemoryTier::save_in_background(
    StateDict resolved, CheckpointInfo manifest,
    std::function<void(int64_t bytes, std::exception_ptr error)> done) {
  // CUDA tensors are copied on a stream of the copier's own, after what the training thread had
  // queued before this call (an event recorded now): never mid optimizer step, and the training
  // stream never waits for the copies.
  auto after_training =
      std::make_shared<const CallerStreams>(CallerStreams::Order::kAfterCallersWork);
  copier_->post([this, resolved = std::move(resolved), manifest = std::move(manifest),
                 done = std::move(done), after_training = std::move(after_training)] {
    int64_t bytes = 0;
    std::exception_ptr error;
    try {
      after_training->run_with([&] { bytes = save(resolved, manifest); });
    } catch (...) {
      error = std::current_exception();
    }
    done(bytes, error);
  });
}

void MemoryTier::release() {
  wait_for_copy();
  if (replication_) replication_->drain();
  slots_.release();
  if (replication_) replication_->release();
  // The regions of ranks this job does not have (a job of more ranks resumed on fewer): their
  // own slots, the replicas they kept and those kept of them. No rank of this job writes them,
  // and the job's last step is on disk; every rank removes those on its host (removing a region
  // twice is harmless).
  for (const HeldSlots& regions : MemorySlots::on_this_host(job_)) {
    if (regions.rank >= world_ || regions.holder >= world_) {
      MemorySlots(job_, regions.rank, 1, 1, regions.holder).release();
    }
  }
  // And their lock files (job_lock.h), once no live process holds them: taking one and letting
  // it go removes it.
  const std::string lock_prefix = "dcpp-job." + job_ + ".";
  std::error_code error;
  for (const auto& entry : fs::directory_iterator("/dev/shm", error)) {
    const std::string name = entry.path().filename().string();
    int rank = -1, used = 0;
    if (name.rfind(lock_prefix, 0) != 0 ||
        std::sscanf(name.c_str() + lock_prefix.size(), "%d.lock%n", &rank, &used) != 1 ||
        name.size() != lock_prefix.size() + static_cast<std::size_t>(used) || rank < world_) {
      continue;
    }
    ExclusiveFileLock::try_lock(entry.path());
  }
}

}  // namespace dcpp::detail
