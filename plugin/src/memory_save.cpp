// CheckpointManager::save_to_memory: a copy of the state into this rank's memory slot (the
// memory tier, memory_tier.h), on the training thread, with no other rank involved. Its failure
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
  const std::string where = "memory tier '" + memory->job() + "'";
  const auto start = SteadyClock::now();
  log->begin("memory", "write", request.step, where);
  try {
    record.bytes = detail::tensor_bytes(resolved);
    const CheckpointInfo manifest =
        detail::make_manifest(request, CheckpointKind::kFull, world, record.bytes, record, lineage,
                              memory->save_id_of(request.step));
    record.written_bytes = memory->save(resolved, manifest);
    record.write_seconds = seconds_since(start);
    record.ok = true;
    log->record("memory", "write", request.step, record.written_bytes, record.write_seconds, where);
  } catch (...) {
    record.error = detail::exception_message(std::current_exception());
    detail::logger().error("memory step {} failed on rank {}: {}", request.step, rank,
                           record.error);
  }
  history.add(record);
  return record.ok;
}

}  // namespace dcpp
