// CheckpointManager. Commit protocol (see the header): dcpp::save into `<step>.incomplete/` on
// every rank -> (coordinator) manifest written durably -> rename to `<step>/` -> fsync of the root.
// Async saves run the part after dcpp::save on the background worker once the upload completes;
// dcpp::save completes the upload on a rank only after the coordinator committed `.metadata`, so
// the rename never precedes any rank's durable data.

#include <dcpp/plugin/checkpoint_manager.h>

#include "core/serial_worker.h"
#include "checkpoint_info_json.h"
#include "core/durable_file.h"
#include "core/logging.h"
#include "phase_log.h"
#include "state_tools.h"

#include <dcpp/async/async_checkpointer.h>
#include <dcpp/checkpoint/checkpointer.h>
#include <dcpp/core/checkpoint_error.h>
#include <dcpp/dist/process_group.h>
#include <dcpp/state_dict/stateful_swap.h>

#include <ATen/ATen.h>

#include <chrono>
#include <cstring>
#include <set>

namespace dcpp {
namespace fs = std::filesystem;

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string error_text(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "unknown error";
  }
}

// Collective on `group`: the minimum (or maximum) of `value` over the ranks.
int64_t reduce(const c10::intrusive_ptr<c10d::ProcessGroup>& group, int64_t value,
               c10d::ReduceOp op) {
  if (!group) return value;
  std::vector<at::Tensor> tensors{at::full({1}, value, at::kLong)};
  c10d::AllreduceOptions options;
  options.reduceOp = op;
  group->allreduce(tensors, options)->wait();
  return tensors[0].item<int64_t>();
}

int64_t broadcast(const c10::intrusive_ptr<c10d::ProcessGroup>& group, int64_t value, int root) {
  if (!group) return value;
  std::vector<at::Tensor> tensors{at::full({1}, value, at::kLong)};
  c10d::BroadcastOptions options;
  options.rootRank = root;
  group->broadcast(tensors, options)->wait();
  return tensors[0].item<int64_t>();
}

// Bytes of the items `rank` wrote: the file system writer names each rank's files `__<rank>_*`.
int64_t bytes_written_by(const Metadata& metadata, int rank) {
  const std::string prefix = "__" + std::to_string(rank) + "_";
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

// Collective on `group`: `root`'s `text` on every rank.
std::string broadcast_text(const c10::intrusive_ptr<c10d::ProcessGroup>& group,
                           const std::string& text, int root) {
  if (!group) return text;
  const int64_t size = broadcast(group, static_cast<int64_t>(text.size()), root);
  if (size == 0) return {};
  at::Tensor bytes = at::empty({size}, at::kByte);
  if (group->getRank() == root) std::memcpy(bytes.data_ptr(), text.data(), text.size());
  std::vector<at::Tensor> tensors{bytes};
  c10d::BroadcastOptions options;
  options.rootRank = root;
  group->broadcast(tensors, options)->wait();
  return std::string(static_cast<const char*>(bytes.data_ptr()), static_cast<size_t>(size));
}

}  // namespace

class CheckpointManager::Impl {
 public:
  explicit Impl(CheckpointManagerOptions o) : options(std::move(o)) {
    if (options.root.empty()) {
      throw CheckpointError(
          "CheckpointManagerOptions::root is empty; give the directory "
          "that holds the step checkpoints");
    }
    group = options.process_group;
    if (group) {
      rank = group->getRank();
      world = group->getSize();
    } else {
      rank = options.rank;
      world = options.world_size;
    }
    // The store keys of this manager's groups, its own: each rank counts the managers it made
    // from this store in the store itself (ranks may be threads of one process sharing it).
    std::string group_name = "dcpp-manager";
    if (world > 1 && options.store) {
      const int64_t n = options.store->add("dcpp/managers-made-by-rank-" + std::to_string(rank), 1);
      if (n > 1) group_name += "-" + std::to_string(n);
    }
    if (world > 1 && !group) {
      if (!options.store) {
        throw CheckpointError("CheckpointManager with world_size " + std::to_string(world) +
                              " needs options.process_group or options.store");
      }
      group = make_gloo_process_group(options.store, rank, world,
                                      ProcessGroupOptions().with_group_name(group_name));
    }
    log = std::make_unique<detail::PhaseLog>(
        rank == options.coordinator_rank ? options.metrics_file : fs::path(), rank);
    if (options.async) {
      AsyncCheckpointerOptions a;
      a.stager = options.stager;
      a.file_system = options.file_system;
      a.file_system.overwrite = true;  // a temporary directory an earlier failed try left
      a.coordinator_rank = options.coordinator_rank;
      if (world > 1) {
        if (options.async_process_group) {
          a.process_group = options.async_process_group;
        } else if (options.store) {
          a.store = options.store;
          a.rank = rank;
          a.world_size = world;
          a.group_options = ProcessGroupOptions().with_group_name(group_name + "-async");
        } else {
          throw CheckpointError(
              "an async CheckpointManager on several ranks needs "
              "options.async_process_group or options.store (the uploads "
              "need a process group of their own)");
        }
      }
      checkpointer = std::make_unique<AsyncCheckpointer>(std::move(a));
    }
    prepare_root();
    last_save = now();
  }

  // The clock of save_every_seconds (options.clock when given).
  Clock::time_point now() const { return options.clock ? options.clock() : Clock::now(); }

  bool is_coordinator() const { return rank == options.coordinator_rank; }

  // Collective: the coordinator creates the root and cleans it (clean_root); every rank throws
  // the same CheckpointError when that failed, so none is left waiting for the coordinator.
  void prepare_root() {
    std::string error;
    if (is_coordinator()) {
      try {
        clean_root();
      } catch (const std::exception& e) {
        error = e.what();
      }
    }
    error = broadcast_text(group, error, options.coordinator_rank);
    if (!error.empty()) {
      throw CheckpointError("checkpoint root '" + options.root.string() +
                            "' cannot be used (rank " + std::to_string(options.coordinator_rank) +
                            ": " + error +
                            "); give CheckpointManagerOptions::root a directory the coordinator "
                            "can create and every rank can write");
    }
  }

  // Coordinator, before any save: creates the root; what a killed job left behind is removed.
  void clean_root() {
    std::error_code error;
    if (fs::exists(options.root, error) && !fs::is_directory(options.root, error)) {
      throw std::runtime_error("it exists and is not a directory");
    }
    fs::create_directories(options.root, error);
    if (error) throw std::runtime_error("cannot create it: " + error.message());
    for (const auto& entry : fs::directory_iterator(options.root)) {
      const std::string name = entry.path().filename().string();
      const bool temporary = name.size() > 11 && name.rfind(".incomplete") == name.size() - 11;
      const bool deleting = name.size() > 9 && name.rfind(".deleting") == name.size() - 9;
      if (temporary || deleting) {
        detail::logger().info("removing '{}' left by an earlier job", entry.path().string());
        fs::remove_all(entry.path());
      }
    }
  }

  // Coordinator: manifest, rename, fsync of the root. Throws CheckpointError.
  void commit(const fs::path& temporary, const fs::path& final_path, const CheckpointInfo& info) {
    const bool sync = options.file_system.sync_files;
    detail::write_file_durably(temporary / kCheckpointInfoFile,
                               detail::checkpoint_info_to_json(info), sync);
    if (fs::exists(final_path)) fs::remove_all(final_path);
    detail::rename_durably(temporary, final_path, sync);
    detail::logger().info("saved step {} to '{}' ({} bytes)", info.step, final_path.string(),
                          info.bytes);
  }

  // Coordinator, on the worker: deletes what the retention policy does not keep.
  void prune() {
    if (!options.retention.prunes()) return;
    for (const CheckpointInfo& doomed :
         checkpoints_to_delete(list_checkpoints(options.root), options.retention)) {
      const auto start = Clock::now();
      const fs::path deleting = doomed.path.string() + ".deleting";
      try {
        log->begin("prune", "delete", doomed.step, doomed.path.string());
        detail::rename_durably(doomed.path, deleting, options.file_system.sync_files);
        fs::remove_all(deleting);
        log->record("prune", "delete", doomed.step, 0, seconds_since(start), doomed.path.string());
      } catch (const std::exception& e) {
        detail::logger().warn("pruning '{}' failed: {}", doomed.path.string(), e.what());
      }
    }
  }

  bool is_saved(int64_t step) {
    std::lock_guard<std::mutex> lock(mutex);
    return saved_steps.count(step) != 0;
  }
  void mark_saved(int64_t step) {
    std::lock_guard<std::mutex> lock(mutex);
    saved_steps.insert(step);
  }

  // `thrown`: the error was thrown to the caller already; wait() does not report it again.
  void add_record(const SaveRecord& record, bool thrown = false) {
    std::lock_guard<std::mutex> lock(mutex);
    records.push_back(record);
    if (!record.ok && !thrown && !first_error) {
      first_error = std::make_exception_ptr(CheckpointError(record.error));
    }
  }

  // `bytes`: what the checkpoint stores (stored_bytes).
  CheckpointInfo make_info(const SaveRequest& request, const std::string& kind, int64_t bytes,
                           const SaveRecord& record) const {
    CheckpointInfo info;
    info.step = request.step;
    info.epoch = request.epoch;
    info.kind = kind;
    info.metrics = request.metrics;
    info.content = request.content;
    info.world_size = world;
    info.committed_at = unix_now();
    info.bytes = bytes;
    info.plan_seconds = record.plan_seconds;
    info.stage_seconds = record.stage_seconds;
    info.write_seconds = record.write_seconds;
    return info;
  }

  // Sync save + commit on every rank; throws on every rank when any failed. `kind`: "save" (a
  // full checkpoint) or "export", also the operation named in the log.
  SaveRecord save_blocking(const StateDict& resolved, const SaveRequest& request,
                           const std::string& kind, const fs::path& final_path, SaveRecord record) {
    const fs::path temporary = final_path.string() + ".incomplete";
    SaveOptions save_options;
    save_options.file_system = options.file_system;
    save_options.file_system.overwrite = true;
    save_options.process_group = group;
    save_options.coordinator_rank = options.coordinator_rank;
    log->begin(kind, "write", request.step, temporary.string());
    auto start = Clock::now();
    // Throws on every rank when any rank failed.
    const Metadata metadata = dcpp::save(resolved, temporary, save_options);
    record.write_seconds = seconds_since(start);
    record.written_bytes = bytes_written_by(metadata, rank);
    log->record(kind, "write", request.step, record.written_bytes, record.write_seconds,
                temporary.string());
    log->begin(kind, "commit", request.step, final_path.string());
    start = Clock::now();
    std::string commit_error;
    if (is_coordinator()) {
      try {
        commit(temporary, final_path,
               make_info(request, kind == "export" ? "export" : "full", stored_bytes(metadata),
                         record));
      } catch (const std::exception& e) {
        commit_error = e.what();
      }
    }
    if (reduce(group, commit_error.empty() ? 1 : 0, c10d::ReduceOp::MIN) == 0) {
      throw CheckpointError("committing '" + final_path.string() + "' failed on rank " +
                            std::to_string(options.coordinator_rank) +
                            (commit_error.empty() ? "" : ": " + commit_error));
    }
    record.commit_seconds = seconds_since(start);
    log->record(kind, "commit", request.step, 0, record.commit_seconds, final_path.string());
    record.ok = true;
    return record;
  }

  CheckpointManagerOptions options;
  c10::intrusive_ptr<c10d::ProcessGroup> group;
  int rank = 0;
  int world = 1;
  std::unique_ptr<AsyncCheckpointer> checkpointer;
  std::unique_ptr<detail::PhaseLog> log;
  Clock::time_point last_save;
  // Steps handed to an async save by save() (the calling thread's own): a second save of one
  // waits for the first's outcome.
  std::set<int64_t> async_steps;

  std::mutex mutex;  // guards saved_steps, records and first_error (the worker writes them)
  std::set<int64_t> saved_steps;  // steps whose save committed on this rank
  std::vector<SaveRecord> records;
  std::exception_ptr first_error;

  // Declared last: destroyed first, so its tasks finish while everything above is alive.
  detail::SerialWorker worker;
};

CheckpointManager::CheckpointManager(CheckpointManagerOptions options)
    : impl_(std::make_unique<Impl>(std::move(options))) {}

CheckpointManager::~CheckpointManager() {
  try {
    if (impl_->checkpointer) impl_->checkpointer->wait();
    impl_->worker.drain();
  } catch (...) {
  }
}

const CheckpointManagerOptions& CheckpointManager::options() const { return impl_->options; }
int CheckpointManager::rank() const { return impl_->rank; }
int CheckpointManager::world_size() const { return impl_->world; }
const c10::intrusive_ptr<c10d::ProcessGroup>& CheckpointManager::process_group() const {
  return impl_->group;
}

bool CheckpointManager::is_save_due(int64_t step) const {
  const auto& o = impl_->options;
  if (o.save_every_steps > 0 && step % o.save_every_steps == 0) return true;
  if (o.save_every_seconds <= 0) return false;
  return std::chrono::duration<double>(impl_->now() - impl_->last_save).count() >=
         o.save_every_seconds;
}

ManagedSave CheckpointManager::save(const StateDict& state, const SaveRequest& request) {
  Impl& m = *impl_;
  ManagedSave result;
  result.path = m.options.root / step_directory_name(request.step);
  if (m.async_steps.erase(request.step) != 0) {
    m.worker.drain();  // an async save of this step is in flight: its outcome decides
  }
  if (m.is_saved(request.step) || fs::exists(result.path / ".metadata")) {
    Promise<void> done;
    done.set_value();
    result.staged = result.committed = done.get_future();
    result.skipped = true;
    return result;
  }
  m.last_save = m.now();

  SaveRecord record;
  record.step = request.step;
  record.kind = "full";
  record.async = m.options.async;
  m.log->begin("save", "plan", request.step, result.path.string());
  auto start = Clock::now();
  StateDict resolved = resolve_statefuls(state);
  record.bytes = detail::tensor_bytes(resolved);
  record.plan_seconds = seconds_since(start);
  m.log->record("save", "plan", request.step, record.bytes, record.plan_seconds,
                result.path.string());

  if (!m.options.async) {
    try {
      record = m.save_blocking(resolved, request, "save", result.path, record);
    } catch (const std::exception& e) {
      record.error = e.what();
      m.add_record(record, /*thrown=*/true);
      throw;
    }
    m.add_record(record);
    m.mark_saved(request.step);
    if (m.is_coordinator()) m.worker.post([&m] { m.prune(); });
    Promise<void> done;
    done.set_value();
    result.staged = result.committed = done.get_future();
    return result;
  }

  const fs::path temporary = result.path.string() + ".incomplete";
  m.async_steps.insert(request.step);
  m.log->begin("save", "stage", request.step, temporary.string());
  start = Clock::now();
  AsyncSaveResponse response = m.checkpointer->async_save(resolved, temporary);
  const double call_seconds = seconds_since(start);
  // A blocking stager has staged inside async_save: measured here, not when the (low-priority)
  // worker thread gets to look.
  const bool staged_in_call = response.staging_completion.is_ready();
  auto committed = std::make_shared<Promise<void>>();
  result.staged = response.staging_completion;
  result.committed = committed->get_future();
  const fs::path final_path = result.path;
  m.worker.post([&m, response, committed, record, request, start, call_seconds, staged_in_call,
                 temporary, final_path]() mutable {
    try {
      response.staging_completion.wait();
      record.stage_seconds = staged_in_call ? call_seconds : seconds_since(start);
      m.log->record("save", "stage", request.step, record.bytes, record.stage_seconds,
                    temporary.string());
      m.log->begin("save", "write", request.step, temporary.string());
      const Metadata& metadata = response.upload_completion.get();
      record.write_seconds = seconds_since(start) - record.stage_seconds;
      record.written_bytes = bytes_written_by(metadata, m.rank);
      m.log->record("save", "write", request.step, record.written_bytes, record.write_seconds,
                    temporary.string());
      m.log->begin("save", "commit", request.step, final_path.string());
      const auto commit_start = Clock::now();
      if (m.is_coordinator()) {
        m.commit(temporary, final_path,
                 m.make_info(request, "full", stored_bytes(metadata), record));
      }
      record.commit_seconds = seconds_since(commit_start);
      m.log->record("save", "commit", request.step, 0, record.commit_seconds, final_path.string());
      record.ok = true;
      m.add_record(record);
      m.mark_saved(request.step);
      committed->set_value();
      if (m.is_coordinator()) m.prune();
    } catch (...) {
      record.error = error_text(std::current_exception());
      detail::logger().error("checkpoint of step {} failed on rank {}: {}", request.step, m.rank,
                             record.error);
      m.add_record(record);
      committed->set_exception(std::current_exception());
    }
  });
  return result;
}

fs::path CheckpointManager::export_state(const StateDict& state, const SaveRequest& request,
                                         std::optional<at::ScalarType> dtype) {
  Impl& m = *impl_;
  if (m.checkpointer) m.checkpointer->wait();  // one save at a time on the file system
  const fs::path final_path = m.options.root / ("export-" + step_directory_name(request.step));
  SaveRecord record;
  record.step = request.step;
  record.kind = "export";
  m.log->begin("export", "plan", request.step, final_path.string());
  const auto start = Clock::now();
  StateDict cast = detail::cast_floating(resolve_statefuls(state), dtype);
  record.bytes = detail::tensor_bytes(cast);
  record.plan_seconds = seconds_since(start);
  m.log->record("export", "plan", request.step, record.bytes, record.plan_seconds,
                final_path.string());
  record = m.save_blocking(cast, request, "export", final_path, record);
  m.add_record(record);
  return final_path;
}

std::optional<CheckpointInfo> CheckpointManager::restore(StateDict& state,
                                                         const RestoreRequest& request) {
  Impl& m = *impl_;
  fs::path path = request.path;
  if (path.empty() && request.step) {
    path = m.options.root / step_directory_name(*request.step);
  }
  if (path.empty()) {
    int64_t step = -1;
    if (m.is_coordinator()) {
      if (auto latest = latest_checkpoint(m.options.root)) step = latest->step;
    }
    step = broadcast(m.group, step, m.options.coordinator_rank);
    if (step < 0) return std::nullopt;
    path = m.options.root / step_directory_name(step);
  }
  if (!fs::exists(path / ".metadata")) {
    std::string steps;
    for (const CheckpointInfo& info : list_checkpoints(m.options.root)) {
      steps += (steps.empty() ? "" : ", ") + std::to_string(info.step);
    }
    throw CheckpointError(
        "cannot resume from '" + path.string() + "' on rank " + std::to_string(m.rank) +
        ": it is not a complete checkpoint (no .metadata); " +
        (steps.empty() ? "there is no complete checkpoint under '" + m.options.root.string() + "'"
                       : "the complete checkpoints under '" + m.options.root.string() +
                             "' are of steps " + steps));
  }
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
  m.log->begin("load", "plan", info.step, path.string());
  auto start = Clock::now();
  const int64_t bytes = detail::tensor_bytes(resolve_statefuls(target));
  m.log->record("load", "plan", info.step, bytes, seconds_since(start), path.string());
  LoadOptions load_options;
  load_options.process_group = m.group;
  load_options.coordinator_rank = m.options.coordinator_rank;
  load_options.allow_partial_load = request.allow_partial_load;
  load_options.all_or_nothing = request.all_or_nothing;
  m.log->begin("load", "read", info.step, path.string());
  start = Clock::now();
  dcpp::load(target, path, load_options);
  detail::copy_loaded_values(state, target);
  m.log->record("load", "read", info.step, bytes, seconds_since(start), path.string());
  return info;
}

std::vector<CheckpointInfo> CheckpointManager::list() const {
  return list_checkpoints(impl_->options.root);
}

std::optional<CheckpointInfo> CheckpointManager::latest() const {
  return latest_checkpoint(impl_->options.root);
}

void CheckpointManager::wait() {
  if (impl_->checkpointer) impl_->checkpointer->wait();
  impl_->worker.drain();
  std::exception_ptr error;
  {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    std::swap(error, impl_->first_error);
  }
  if (error) std::rethrow_exception(error);
}

std::vector<SaveRecord> CheckpointManager::history() const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return impl_->records;
}

}  // namespace dcpp
