// The CheckpointManager's constructor (Impl's): the process groups (given, or made from the store
// with names of this manager's own), the AsyncCheckpointer of async saves, the phase log, and the
// root prepared collectively: the coordinator creates it; the ranks find who shares it; each
// root's leader locks it for this job (job_lock.h: a second live job on the root is refused on
// every rank, naming the first) and removes what a killed job left (the `.incomplete` directories
// of saves never committed, the `.deleting` ones of prunes never finished); every rank makes its
// remote tier, if any (a rank without credentials, or a missing bucket, fails here, not at the
// first drain; a store that cannot be reached is a warning); then every rank learns how that went,
// and that every rank sees the root. The first drain pass copies the steps an earlier job
// committed but did not drain.

#include "checkpoint_commit.h"
#include "checkpoint_manager_impl.h"
#include "checkpoint_pruning.h"
#include "core/logging.h"
#include "dist/legacy_ranks.h"
#include "dist/store_rank.h"
#include "job_lock.h"
#include "memory_tier.h"
#include "options_check.h"
#include "rank_agreement.h"
#include "root_sharing.h"

#include <dcpp/core/checkpoint_error.h>
#include <dcpp/dist/process_group.h>
#include <dcpp/storage/s3_deadline.h>
#include <dcpp/storage/s3_storage.h>

#include <cstring>
#include <optional>
#include <stdexcept>
#include <string>

namespace dcpp {
namespace fs = std::filesystem;

namespace {

bool ends_with(const std::string& text, const char* suffix) {
  const size_t length = std::strlen(suffix);
  return text.size() > length && text.compare(text.size() - length, length, suffix) == 0;
}

// Creates `root` (and its parents). Throws std::runtime_error saying what is wrong.
void create_root(const fs::path& root) {
  std::error_code error;
  if (fs::exists(root, error) && !fs::is_directory(root, error)) {
    throw std::runtime_error("it exists and is not a directory");
  }
  fs::create_directories(root, error);
  if (error) throw std::runtime_error("cannot create it: " + error.message());
}

}  // namespace

CheckpointManager::Impl::Impl(CheckpointManagerOptions o)
    : options(detail::fold_legacy_ranks(std::move(o), "CheckpointManagerOptions")) {
  detail::check_manager_options(options);
  if (options.root.empty()) {
    throw CheckpointError(ErrorKind::kUsage,
                          "CheckpointManagerOptions::root is empty; give the directory "
                          "that holds the step checkpoints");
  }
  if (is_s3_url(options.root.string())) {
    throw CheckpointError(ErrorKind::kUsage,
                          "CheckpointManagerOptions::root is " + options.root.string() +
                              ": the manager commits its steps in a local or shared directory; "
                              "give the object store as CheckpointManagerOptions::remote, a tier "
                              "the steps drain to (docs/storage.md)");
  }
  group = options.ranks.process_group;
  if (group) {
    rank = group->getRank();
    world = group->getSize();
  } else {
    rank = detail::rank_for_store(options.ranks, "CheckpointManagerOptions");
    world = options.ranks.world_size;
  }
  // The store keys of this manager's groups, its own: each rank counts the managers it made
  // from this store in the store itself (ranks may be threads of one process sharing it).
  std::string group_name = "dcpp-manager";
  if (world > 1 && options.ranks.store) {
    const int64_t n =
        options.ranks.store->add("dcpp/managers-made-by-rank-" + std::to_string(rank), 1);
    if (n > 1) group_name += "-" + std::to_string(n);
  }
  if (world > 1 && !group) {
    if (!options.ranks.store) {
      throw CheckpointError(ErrorKind::kUsage,
                            "CheckpointManager with world_size " + std::to_string(world) +
                                " needs options.ranks.process_group or options.ranks.store");
    }
    group = make_gloo_process_group(options.ranks.store, rank, world,
                                    ProcessGroupOptions().with_group_name(group_name));
  }
  log = std::make_unique<detail::PhaseLog>(
      rank == options.ranks.coordinator_rank ? options.metrics_file : fs::path(), rank);
  if (options.plan_caching) {
    blocking_plan_cache = std::make_shared<SavePlanCache>();
  }
  if (options.async) {
    AsyncCheckpointerOptions a;
    a.stager = options.stager;
    if (options.plan_caching) {
      a.plan_cache = std::make_shared<SavePlanCache>();
    }
    a.file_system = options.file_system;
    a.replica_check = options.replica_check;
    a.file_system.overwrite = true;  // a temporary directory an earlier failed try left
    a.ranks.coordinator_rank = options.ranks.coordinator_rank;
    if (world > 1) {
      if (options.async_process_group) {
        a.ranks.process_group = options.async_process_group;
      } else if (options.ranks.store) {
        a.ranks.with_store(options.ranks.store, rank, world);
        a.group_options = ProcessGroupOptions().with_group_name(group_name + "-async");
      } else {
        throw CheckpointError(ErrorKind::kUsage,
                              "an async CheckpointManager on several ranks needs "
                              "options.async_process_group or options.ranks.store (the uploads "
                              "need a process group of their own)");
      }
    }
    checkpointer = std::make_unique<AsyncCheckpointer>(std::move(a));
  }
  prepare_root();
  if (options.memory.every_steps != 0) {
    memory = std::make_unique<detail::MemoryTier>(options.memory, options.root, group, rank, world,
                                                  options.ranks.coordinator_rank);
  }
  if (remote && options.node_local_root && is_coordinator()) {
    host_recheck = std::make_unique<detail::DelayedPost>(
        [this] { drainer.post([this] { drain_remote(false); }); });
  }
  if (remote && is_root_leader()) {  // steps an earlier job did not drain
    drainer.post([this] { drain_remote(false, /*starting=*/true); });
  }
  schedule.restart();
}

// Collective: the coordinator creates the root, and with a node-local root every rank does so on
// its host; then the ranks find who shares it (root_sharing.h); each root's leader takes the job
// lock and cleans the root (clean_root), and with a memory tier every rank locks its regions
// (job_lock.h: a refusal is kUsage on every rank, naming the holder); every rank makes its
// RemoteTier
// (resolving its S3 credentials), and the coordinator lists the store (one it cannot reach is a
// warning: the job works locally). Every rank throws the same CheckpointError when any of it
// failed on any rank, naming the ranks, so none is left waiting for another.
void CheckpointManager::Impl::prepare_root() {
  const bool node_local = options.node_local_root;
  if (node_local && !options.remote.enabled()) {
    throw CheckpointError(ErrorKind::kUsage,
                          "CheckpointManagerOptions::node_local_root needs a remote tier "
                          "(CheckpointManagerOptions::remote): each host's disk holds only its "
                          "ranks' files, so a step can be resumed only from the store the hosts "
                          "drain to");
  }
  const auto unusable = [&](const std::string& failures) {
    return CheckpointError(ErrorKind::kIo,
                           "checkpoint root '" + options.root.string() + "' cannot be used (" +
                               failures +
                               "); give CheckpointManagerOptions::root a directory the "
                               "coordinator can create and every rank can write");
  };
  std::string error;
  if (is_coordinator() || node_local) {
    try {
      create_root(options.root);
    } catch (const std::exception& e) {
      error = e.what();
    }
  }
  error = detail::failures_of_ranks(group, rank, error);
  if (!error.empty()) throw unusable(error);
  sharing = detail::find_root_sharing(group, rank, world, options.ranks.coordinator_rank,
                                      options.root, node_local);
  // The job's locks before anything is removed from the root: a live job's saves in progress are
  // not a killed job's leftovers. Then each root's leader cleans it.
  bool refused = false;
  try {
    if (is_root_leader()) locks.root = detail::JobLock::lock_root(options.root);
    if (options.memory.every_steps != 0) {
      locks.memory = detail::JobLock::lock_memory_regions(
          detail::memory_job_name(options.memory, options.root), rank);
    }
    if (is_root_leader()) clean_root();
  } catch (const CheckpointError& e) {
    error = e.what();
    refused = e.kind() == ErrorKind::kUsage;
  } catch (const std::exception& e) {
    error = e.what();
  }
  error = detail::failures_of_ranks(group, rank, error);
  if (!error.empty()) {
    if (detail::max_over_ranks(group, {refused ? 1 : 0}).at(0) != 0) {
      throw CheckpointError(ErrorKind::kUsage, "CheckpointManager on root '" +
                                                   options.root.string() +
                                                   "' cannot start while another live job uses "
                                                   "its files (" +
                                                   error + ")");
    }
    throw unusable(error);
  }
  std::string remote_error, continued;
  if (options.remote.enabled()) {
    const detail::DrainRole role = !node_local        ? detail::DrainRole::kWholeSteps
                                   : is_coordinator() ? detail::DrainRole::kHostCoordinator
                                                      : detail::DrainRole::kHostFiles;
    try {
      // Its credentials resolved (an STS or IMDS that hangs costs at most the restart timeout).
      std::optional<S3Deadline> bound;
      if (options.remote.restart_timeout.count() > 0) {
        bound.emplace(options.remote.restart_timeout, "RemoteTierOptions::restart_timeout");
      }
      remote = std::make_unique<detail::RemoteTier>(options.remote, *log, role, rank,
                                                    options.step_names);
    } catch (const std::exception& e) {
      remote_error = e.what();
    }
  }
  if (is_coordinator() && remote_error.empty()) {
    // Lists the remote tier: a missing bucket or refused credentials fail here; a store that
    // cannot be reached is a warning (the drains try again).
    try {
      bool unreachable = false;
      continued =
          detail::encode_lineage(detail::lineage_to_continue(all_checkpoints(&unreachable)));
    } catch (const std::exception& e) {
      (remote ? remote_error : error) = e.what();
    }
  }
  error = detail::broadcast_text_from(group, error, options.ranks.coordinator_rank);
  if (!error.empty()) {
    throw CheckpointError(ErrorKind::kIo,
                          "checkpoint root '" + options.root.string() + "' cannot be used (rank " +
                              std::to_string(options.ranks.coordinator_rank) + ": " + error +
                              "); give CheckpointManagerOptions::root a directory the coordinator "
                              "can create and every rank can write");
  }
  if (options.remote.enabled()) {
    remote_error = detail::failures_of_ranks(group, rank, remote_error);
    if (!remote_error.empty()) {
      throw CheckpointError(ErrorKind::kUsage, "the remote tier " + options.remote.url +
                                                   " cannot be used (" + remote_error +
                                                   "); fix CheckpointManagerOptions::remote (or "
                                                   "the credentials) on those ranks");
    }
  }
  lineage = detail::decode_lineage(
      detail::broadcast_text_from(group, continued, options.ranks.coordinator_rank));
  if (node_local && is_coordinator()) {
    detail::logger().info(
        "node-local root '{}', one directory per group of ranks ({}): each "
        "group's first rank commits it and drains its files to {}",
        options.root.string(), sharing.describe(), options.remote.url);
  }
}

// Before any save, on the root's leader (the coordinator; each host's leader with a node-local
// root), once it holds the job lock: a step a killed commit was replacing is resolved
// (recover_replaced_steps); what else a killed job left behind is removed.
// Throws std::runtime_error (or std::filesystem::filesystem_error) saying what is wrong.
void CheckpointManager::Impl::clean_root() {
  detail::recover_replaced_steps(options.root, options.file_system.sync_files);
  for (const auto& entry : fs::directory_iterator(options.root)) {
    const std::string name = entry.path().filename().string();
    if (ends_with(name, detail::kIncompleteSuffix) || ends_with(name, detail::kDeletingSuffix)) {
      detail::logger().info("removing '{}' left by an earlier job", entry.path().string());
      std::error_code gone;
      fs::remove_all(entry.path(), gone);
    }
  }
}

}  // namespace dcpp
