// CheckpointManager::export_state: the tensors of a state (e.g. the model's), cast when asked,
// saved and committed like a step checkpoint (blocking) as `export-step-<step>/`, kind kExport,
// which list_checkpoints() and latest() never return.

#include "checkpoint_manager_impl.h"
#include "state_tools.h"
#include "stopwatch.h"

#include <dcpp/state_dict/stateful_swap.h>

namespace dcpp {
namespace fs = std::filesystem;

fs::path CheckpointManager::Impl::export_state(const StateDict& state, const SaveRequest& request,
                                               std::optional<at::ScalarType> dtype) {
  if (checkpointer) checkpointer->wait();  // one save at a time on the file system
  const fs::path final_path = options.root / ("export-" + step_directory_name(request.step));
  SaveRecord record;
  record.step = request.step;
  record.kind = CheckpointKind::kExport;
  log->begin("export", "plan", request.step, final_path.string());
  const auto start = detail::SteadyClock::now();
  StateDict cast = detail::cast_floating(resolve_statefuls(state), dtype);
  record.bytes = detail::tensor_bytes(cast);
  record.plan_seconds = detail::seconds_since(start);
  log->record("export", "plan", request.step, record.bytes, record.plan_seconds,
              final_path.string());
  record = save_blocking(cast, request, CheckpointKind::kExport, final_path, record);
  history.add(record);
  return final_path;
}

}  // namespace dcpp
