// CheckpointManager::save: a step checkpoint written by every rank into `step-<step>.incomplete/`,
// then committed (checkpoint_commit.h). A sync save commits on the calling thread and ends with a
// status all-reduce, so a failed commit throws on every rank. An async save returns once staging
// started; the manager's background worker waits for the upload and commits (coordinator), so the
// training thread never waits for it; dcpp::save completes the upload on a rank only after the
// coordinator committed `.metadata`, so the rename never precedes any rank's durable data.

#include "checkpoint_commit.h"
#include "checkpoint_manager_impl.h"
#include "core/durable_file.h"
#include "core/exception_message.h"
#include "core/logging.h"
#include "local_steps.h"
#include "rank_agreement.h"
#include "save_gate.h"
#include "state_tools.h"
#include "stopwatch.h"
#include "storage/dcp_file_names.h"

#include <dcpp/checkpoint/checkpointer.h>
#include <dcpp/core/checkpoint_error.h>
#include <dcpp/state_dict/stateful_swap.h>
#include <dcpp/storage/filesystem_writer.h>
#include <dcpp/storage/megatron_storage.h>

namespace dcpp {
namespace fs = std::filesystem;
using detail::seconds_since;
using detail::SteadyClock;

namespace {

// Bytes of the items `rank` wrote (DCP's writers name each rank's files `__<rank>_*`).
int64_t bytes_written_by(const Metadata& metadata, int rank) {
  const std::string prefix = detail::data_file_prefix(rank);
  int64_t bytes = 0;
  for (const auto& [index, info] : metadata.storage_data) {
    if (info.relative_path.rfind(prefix, 0) == 0) bytes += info.length;
  }
  return bytes;
}

// Bytes of every item the checkpoint stores, as stored.
int64_t stored_bytes(const Metadata& metadata) {
  int64_t bytes = 0;
  for (const auto& [index, info] : metadata.storage_data) bytes += info.length;
  return bytes;
}

// The operation a save of `kind` is recorded as in the phase log.
const char* operation_of(CheckpointKind kind) {
  return kind == CheckpointKind::kExport ? "export" : "save";
}

}  // namespace

// The writer of a save into `temporary`: the disk check first, on each rank that commits a root
// directory (the coordinator, or each host's leader with a node-local root).
detail::SaveGate CheckpointManager::Impl::gated_writer(const fs::path& temporary,
                                                       CheckpointKind kind) const {
  FileSystemWriterOptions layout = options.file_system;
  layout.overwrite = true;  // a temporary directory an earlier failed try left
  const bool megatron =
      kind == CheckpointKind::kFull && options.step_names == StepNames::kMegatronLM;
  return detail::SaveGate(
      [this] {
        if (is_root_leader()) check_disk_space();
      },
      [temporary, layout, megatron]() -> std::unique_ptr<StorageWriter> {
        if (megatron) {
          return make_megatron_writer(temporary, MegatronWriterOptions().with_file_system(layout));
        }
        return std::make_unique<FileSystemWriter>(temporary, layout);
      });
}

void CheckpointManager::Impl::record_committed_step(int64_t step, CheckpointKind kind) const {
  if (kind != CheckpointKind::kFull || options.step_names != StepNames::kMegatronLM) return;
  // Megatron-LM's finalize step writes str(iteration), no newline; here through a temporary file.
  detail::write_file_durably(options.root / kMegatronTrackerFile, std::to_string(step),
                             options.file_system.sync_files);
}

// A root's leader, before a save writes anything: throws kIo when the root's free space, less
// options.reserved_disk_bytes, cannot hold another step as large as the newest one (a whole
// step's bytes, on a node-local root too: a host's share of the next one may grow).
void CheckpointManager::Impl::check_disk_space() const {
  const std::optional<CheckpointInfo> newest =
      detail::latest_local_step(options.root, options.node_local_root);
  const uint64_t step_bytes = newest ? static_cast<uint64_t>(newest->bytes) : 0;
  std::error_code error;
  const fs::space_info space = fs::space(options.root, error);
  if (error || space.available >= step_bytes + options.reserved_disk_bytes) return;
  const auto mib = [](uint64_t bytes) { return std::to_string(bytes >> 20) + " MiB"; };
  const std::string backlog = remote ? remote->backlog() : std::string();
  throw CheckpointError(
      ErrorKind::kIo,
      "checkpoint root '" + options.root.string() + "' has " + mib(space.available) +
          " free, and a step takes about " + mib(step_bytes) + " (step " +
          std::to_string(newest ? newest->step : 0) + ") with " + mib(options.reserved_disk_bytes) +
          " to keep free (CheckpointManagerOptions::reserved_disk_bytes): this save would fill "
          "the disk, so it did not start, and the checkpoints there are untouched; " +
          (backlog.empty() ? std::string("free space, or keep fewer steps (retention)")
                           : backlog + ": the remote tier must catch up before local steps go"));
}

// A complete checkpoint at `path` that a save of its step keeps (skipped): one of this run's
// generation or an older generation's that this run did not abandon. An unreadable manifest
// keeps it too. Every rank decides alike: the lineage is the same on every rank.
bool CheckpointManager::Impl::holds_step_to_keep(const fs::path& path) const {
  if (!fs::exists(path / ".metadata")) return false;
  if (lineage.generation == 0) return true;
  try {
    return !detail::replaces(lineage, read_checkpoint_info(path));
  } catch (const CheckpointError&) {
    return true;
  }
}

ManagedSave CheckpointManager::Impl::save(const StateDict& state, const SaveRequest& request) {
  ManagedSave result;
  result.path = options.root / step_directory_name(request.step, options.step_names);
  if (async_steps.erase(request.step) != 0) {
    worker.wait_until_idle();  // an async save of this step is in flight: its outcome decides
  }
  bool skip = history.is_saved(request.step) || holds_step_to_keep(result.path);
  std::string save_id;
  if (options.node_local_root) {
    // Only the coordinator's host holds `.metadata`: it decides, and names the save, so that
    // every host's manifest carries the same identity.
    save_id = detail::broadcast_text_from(group, skip ? "" : detail::new_save_id(),
                                          options.ranks.coordinator_rank);
    skip = save_id.empty();
  }
  if (skip) {
    result.staged = result.committed = make_ready_future();
    result.already_saved = true;
    result.skipped.set(true);
    return result;
  }
  schedule.restart();

  SaveRecord record;
  record.step = request.step;
  record.kind = CheckpointKind::kFull;
  record.async = options.async;
  log->begin("save", "plan", request.step, result.path.string());
  const auto start = SteadyClock::now();
  StateDict resolved;
  try {
    resolved = resolve_statefuls(state);
  } catch (...) {
    // The memory copy this save makes did not happen: the replicas' round still runs.
    if (is_memory_save_due(request.step)) memory->note_failed_save();
    throw;
  }
  record.bytes = detail::tensor_bytes(resolved);
  record.plan_seconds = seconds_since(start);
  log->record("save", "plan", request.step, record.bytes, record.plan_seconds,
              result.path.string());
  if (is_memory_save_due(request.step)) save_resolved_to_memory(resolved, request);
  return options.async ? save_async(resolved, request, record, std::move(result), save_id)
                       : save_sync(resolved, request, record, std::move(result), save_id);
}

// Returns after the commit; throws (on every rank) when the save or the commit failed.
ManagedSave CheckpointManager::Impl::save_sync(const StateDict& resolved,
                                               const SaveRequest& request, SaveRecord record,
                                               ManagedSave result, const std::string& save_id) {
  try {
    record = save_blocking(resolved, request, CheckpointKind::kFull, result.path, record, save_id);
  } catch (const std::exception& e) {
    record.error = e.what();
    history.add(record);  // thrown to the caller: not reported again by wait()
    throw;
  }
  history.add(record);
  history.mark_saved(request.step);
  if (is_root_leader()) worker.post([this] { after_commit(); });
  result.staged = result.committed = make_ready_future();
  return result;
}

// Returns after staging started; the worker finishes the save. Errors travel in `committed`.
ManagedSave CheckpointManager::Impl::save_async(const StateDict& resolved,
                                                const SaveRequest& request, SaveRecord record,
                                                ManagedSave result, const std::string& save_id) {
  const fs::path temporary = detail::incomplete_directory(result.path);
  async_steps.insert(request.step);
  log->begin("save", "stage", request.step, temporary.string());
  const auto start = SteadyClock::now();
  AsyncSaveResponse response = checkpointer->async_save(
      resolved, std::make_shared<detail::SaveGate>(gated_writer(temporary, CheckpointKind::kFull)),
      temporary.string());
  const double call_seconds = seconds_since(start);
  // A blocking stager has staged inside async_save: measured here, not when the (low-priority)
  // worker thread gets to look.
  const bool staged_in_call = response.staged.is_ready();
  auto committed = std::make_shared<Promise<void>>();
  result.staged = response.staged;
  result.committed = committed->get_future();
  const fs::path final_path = result.path;
  worker.post([this, response, committed, record, request, start, call_seconds, staged_in_call,
               temporary, final_path, save_id, lineage = this->lineage]() mutable {
    try {
      response.staged.wait();
      record.stage_seconds = staged_in_call ? call_seconds : seconds_since(start);
      log->record("save", "stage", request.step, record.bytes, record.stage_seconds,
                  temporary.string());
      log->begin("save", "write", request.step, temporary.string());
      const Metadata& metadata = response.committed.get();
      record.write_seconds = seconds_since(start) - record.stage_seconds;
      record.written_bytes = bytes_written_by(metadata, rank);
      log->record("save", "write", request.step, record.written_bytes, record.write_seconds,
                  temporary.string());
      log->begin("save", "commit", request.step, final_path.string());
      const auto commit_start = SteadyClock::now();
      if (is_root_leader()) {
        detail::commit_checkpoint(
            temporary, final_path,
            detail::make_manifest(request, CheckpointKind::kFull, world, stored_bytes(metadata),
                                  record, lineage, save_id),
            options.file_system.sync_files);
        record_committed_step(request.step, CheckpointKind::kFull);
      }
      record.commit_seconds = seconds_since(commit_start);
      log->record("save", "commit", request.step, 0, record.commit_seconds, final_path.string());
      record.ok = true;
      history.add(record);
      history.mark_saved(request.step);
      committed->set_value();
      if (is_root_leader()) after_commit();
    } catch (...) {
      record.error = detail::exception_message(std::current_exception());
      detail::logger().error("checkpoint of step {} failed on rank {}: {}", request.step, rank,
                             record.error);
      remove_failed_save(temporary);
      history.add(record, std::current_exception());
      committed->set_exception(std::current_exception());
    }
  });
  return result;
}

// After a save into `temporary` failed on every rank (a collective failure: no rank writes there
// any more), on the rank that commits the directory: its files go at once, not at the next
// manager's start, so that a disk filled by a failed save does not refuse the saves after it.
void CheckpointManager::Impl::remove_failed_save(const fs::path& temporary) const {
  if (!is_root_leader()) return;
  std::error_code error;
  const uintmax_t removed = fs::remove_all(temporary, error);
  if (error) {
    detail::logger().warn("removing '{}' of a failed save failed (the next manager removes it): {}",
                          temporary.string(), error.message());
  } else if (removed > 0) {
    detail::logger().info("removed '{}' of the failed save", temporary.string());
  }
}

// A step this rank committed whose save then failed on another host's leader: renamed aside
// (`.deleting`, which the next manager removes if this one cannot) and removed.
void CheckpointManager::Impl::withdraw_commit(const fs::path& final_path) const {
  const fs::path deleting = final_path.string() + detail::kDeletingSuffix;
  try {
    detail::rename_durably(final_path, deleting, options.file_system.sync_files);
    fs::remove_all(deleting);
    detail::logger().warn("withdrew '{}': the save failed on another host", final_path.string());
  } catch (const std::exception& e) {
    detail::logger().error("withdrawing '{}', whose save failed on another host, failed: {}",
                           final_path.string(), e.what());
  }
}

SaveRecord CheckpointManager::Impl::save_blocking(const StateDict& resolved,
                                                  const SaveRequest& request, CheckpointKind kind,
                                                  const fs::path& final_path, SaveRecord record,
                                                  const std::string& save_id) {
  const char* operation = operation_of(kind);
  const fs::path temporary = detail::incomplete_directory(final_path);
  SaveOptions save_options;
  save_options.file_system = options.file_system;
  save_options.file_system.overwrite = true;
  save_options.ranks.process_group = group;
  save_options.ranks.coordinator_rank = options.ranks.coordinator_rank;
  save_options.replica_check = options.replica_check;
  if (kind == CheckpointKind::kFull) {
    save_options.plan_cache = blocking_plan_cache;
  }
  log->begin(operation, "write", request.step, temporary.string());
  auto start = SteadyClock::now();
  // Throws on every rank when any rank failed (the disk check on the coordinator included).
  detail::SaveGate writer = gated_writer(temporary, kind);
  Metadata metadata;
  try {
    metadata = dcpp::save(resolved, writer, save_options);
  } catch (...) {
    remove_failed_save(temporary);
    throw;
  }
  record.write_seconds = seconds_since(start);
  record.written_bytes = bytes_written_by(metadata, rank);
  log->record(operation, "write", request.step, record.written_bytes, record.write_seconds,
              temporary.string());
  log->begin(operation, "commit", request.step, final_path.string());
  start = SteadyClock::now();
  std::string commit_error;
  bool committed_here = false;
  if (is_root_leader()) {
    try {
      detail::commit_checkpoint(temporary, final_path,
                                detail::make_manifest(request, kind, world, stored_bytes(metadata),
                                                      record, lineage, save_id),
                                options.file_system.sync_files);
      committed_here = true;
      record_committed_step(request.step, kind);
    } catch (const std::exception& e) {
      commit_error = e.what();
    }
  }
  commit_error = detail::failures_of_ranks(group, rank, commit_error);
  if (!commit_error.empty()) {
    // With a node-local root, another host's commit failed: this host's part of the save is no
    // step, and must not be drained as one.
    if (committed_here) withdraw_commit(final_path);
    remove_failed_save(temporary);
    throw CheckpointError(ErrorKind::kIo,
                          "committing '" + final_path.string() + "' failed (" + commit_error + ")");
  }
  record.commit_seconds = seconds_since(start);
  log->record(operation, "commit", request.step, 0, record.commit_seconds, final_path.string());
  record.ok = true;
  return record;
}

}  // namespace dcpp
