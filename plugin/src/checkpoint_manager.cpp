// CheckpointManager, the public class: each member forwards to CheckpointManager::Impl, whose
// parts live one concept per file (the list is at the top of checkpoint_manager_impl.h).

#include <dcpp/plugin/checkpoint_manager.h>

#include "checkpoint_manager_impl.h"

namespace dcpp {
namespace fs = std::filesystem;

CheckpointManager::CheckpointManager(CheckpointManagerOptions options)
    : impl_(std::make_unique<Impl>(std::move(options))) {}

CheckpointManager::~CheckpointManager() {
  if (impl_->host_recheck) impl_->host_recheck->close();
  try {
    impl_->drain_to_remote(false, false);  // never collective: ranks may end apart
  } catch (...) {                          // logged when it happened
  }
}

const CheckpointManagerOptions& CheckpointManager::options() const { return impl_->options; }
int CheckpointManager::rank() const { return impl_->rank; }
int CheckpointManager::world_size() const { return impl_->world; }
const c10::intrusive_ptr<c10d::ProcessGroup>& CheckpointManager::process_group() const {
  return impl_->group;
}

bool CheckpointManager::is_save_due(int64_t step) const { return impl_->schedule.is_due(step); }

ManagedSave CheckpointManager::save(const StateDict& state, const SaveRequest& request) {
  return impl_->save(state, request);
}

fs::path CheckpointManager::export_state(const StateDict& state, const SaveRequest& request,
                                         std::optional<at::ScalarType> dtype) {
  return impl_->export_state(state, request, dtype);
}

std::optional<CheckpointInfo> CheckpointManager::restore(StateDict& state,
                                                         const RestoreRequest& request) {
  return impl_->restore(state, request);
}

std::vector<CheckpointInfo> CheckpointManager::list() const {
  return list_checkpoints(impl_->options.root);
}

std::vector<CheckpointInfo> CheckpointManager::list_remote() const {
  if (!impl_->remote) return {};
  return impl_->remote->list();
}

std::optional<CheckpointInfo> CheckpointManager::latest() const { return impl_->latest(); }

void CheckpointManager::wait() {
  impl_->wait_until_idle();
  if (std::exception_ptr error = impl_->history.take_first_error()) std::rethrow_exception(error);
}

void CheckpointManager::wait_for_remote() {
  impl_->drain_to_remote(true);
  if (std::exception_ptr error = impl_->history.take_first_error()) std::rethrow_exception(error);
}

std::vector<SaveRecord> CheckpointManager::history() const { return impl_->history.records(); }

}  // namespace dcpp
