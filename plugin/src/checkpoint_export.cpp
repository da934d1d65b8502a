// CheckpointManager::export_state: the tensors of a state (e.g. the model's), cast when asked,
// saved and committed like a step checkpoint (blocking) as `export-step-<step>/`, kind kExport,
// which list_checkpoints() and latest() never return.

#include "checkpoint_manager_impl.h"
#include "state_tools.h"
#include "stopwatch.h"

#include <dcpp/core/checkpoint_error.h>
#include <dcpp/state_dict/stateful_swap.h>

namespace dcpp {
namespace fs = std::filesystem;

fs::path CheckpointManager::Impl::export_state(const StateDict& state, const SaveRequest& request,
                                               std::optional<at::ScalarType> dtype) {
  if (options.node_local_root) {
    throw CheckpointError(ErrorKind::kUsage,
                          "export_state needs a root every rank sees: with node_local_root, an "
                          "export's files would stay scattered over the hosts' disks; save the "
                          "export with dcpp::save to a shared directory or an s3:// URL");
  }
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
