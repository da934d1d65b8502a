// CheckpointManager::save_to_memory: a copy of the state into this rank's memory slot (the
// memory tier, memory_tier.h), with no other rank involved: on the training thread, or with
// copy_while_training on the memory tier's background thread once the Stateful values are
// resolved and the manifest made (they read what the training thread changes). Its failure
// is logged and recorded, never thrown: the ranks would part ways (the others go on training);
// CheckpointCallback stops them together after too many failed saves in a row.

#include "checkpoint_commit.h"
#include "checkpoint_manager_impl.h"
#include "core/exception_message.h"
#include "core/logging.h"
#include "state_tools.h"
#include "stopwatch.h"

#include <dcpp/state_dict/stateful_swap.h>

namespace dcpp {
using detail::seconds_since;
using detail::SteadyClock;

bool CheckpointManager::Impl::save_to_memory(const StateDict& state, const SaveRequest& request) {
  if (!memory) return false;
  try {
    return save_resolved_to_memory(resolve_statefuls(state), request);
  } catch (const std::exception& e) {  // a Stateful's state_dict() threw
    memory->note_failed_save();
    SaveRecord record;
    record.step = request.step;
    record.in_memory = true;
    record.error = e.what();
    detail::logger().error("memory step {} failed on rank {}: {}", request.step, rank,
                           record.error);
    history.add(record);
    return false;
  }
}

bool CheckpointManager::Impl::save_resolved_to_memory(const StateDict& resolved,
                                                      const SaveRequest& request) {
  SaveRecord record;
  record.step = request.step;
  record.in_memory = true;
  const auto start = SteadyClock::now();
  log->begin("memory", "write", request.step, "memory tier '" + memory->job() + "'");
  CheckpointInfo manifest;
  try {
    record.bytes = detail::tensor_bytes(resolved);
    manifest = detail::make_manifest(request, CheckpointKind::kFull, world, record.bytes, record,
                                     lineage, memory->save_id_of(request.step));
  } catch (...) {
    memory->note_failed_save();
    return finish_memory_save(record, start, 0, std::current_exception());
  }
  if (memory->copies_while_training()) {
    memory->save_in_background(resolved, manifest,
                               [this, record, start](int64_t bytes, std::exception_ptr error) {
                                 finish_memory_save(record, start, bytes, error);
                               });
    return true;
  }
  int64_t bytes = 0;
  std::exception_ptr error;
  try {
    bytes = memory->save(resolved, manifest);
  } catch (...) {
    error = std::current_exception();
  }
  return finish_memory_save(record, start, bytes, error);
}

bool CheckpointManager::Impl::finish_memory_save(SaveRecord record, SteadyClock::time_point start,
                                                 int64_t bytes, std::exception_ptr error) {
  if (error) {
    record.error = detail::exception_message(error);
    detail::logger().error("memory step {} failed on rank {}: {}", record.step, rank, record.error);
  } else {
    record.written_bytes = bytes;
    record.write_seconds = seconds_since(start);
    record.ok = true;
    log->record("memory", "write", record.step, bytes, record.write_seconds,
                "memory tier '" + memory->job() + "'");
  }
  history.add(record);
  return record.ok;
}

}  // namespace dcpp
