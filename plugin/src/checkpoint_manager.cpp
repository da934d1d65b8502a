// CheckpointManager, the public class: each member forwards to CheckpointManager::Impl, whose
// parts live one concept per file (the list is at the top of checkpoint_manager_impl.h).

#include <dcpp/plugin/checkpoint_manager.h>

#include "checkpoint_manager_impl.h"

namespace dcpp {
namespace fs = std::filesystem;

CheckpointManager::CheckpointManager(CheckpointManagerOptions options)
    : impl_(std::make_unique<Impl>(std::move(options))) {}

CheckpointManager::~CheckpointManager() { impl_->close(); }

const CheckpointManagerOptions& CheckpointManager::options() const { return impl_->options; }
int CheckpointManager::rank() const { return impl_->this_rank(); }
int CheckpointManager::world_size() const { return impl_->world_size(); }
const c10::intrusive_ptr<c10d::ProcessGroup>& CheckpointManager::process_group() const {
  return impl_->process_group();
}

bool CheckpointManager::is_save_due(int64_t step) const { return impl_->is_save_due(step); }

bool CheckpointManager::is_memory_save_due(int64_t step) const {
  return impl_->is_memory_save_due(step);
}

bool CheckpointManager::save_to_memory(const StateDict& state, const SaveRequest& request) {
  return impl_->save_to_memory(state, request);
}

void CheckpointManager::wait_for_memory_replicas() { impl_->wait_for_memory_replicas(); }

void CheckpointManager::wait_for_memory_copy() { impl_->wait_for_memory_copy(); }

void CheckpointManager::release_memory() { impl_->release_memory(); }

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

std::vector<CheckpointInfo> CheckpointManager::list_remote() const { return impl_->list_remote(); }

std::optional<CheckpointInfo> CheckpointManager::latest() const { return impl_->latest(); }

void CheckpointManager::wait() { impl_->wait(); }

void CheckpointManager::wait_for_remote() { impl_->wait_for_remote(); }

std::vector<SaveRecord> CheckpointManager::history() const { return impl_->records(); }
std::vector<SaveRecord> CheckpointManager::history(std::size_t count) const {
  return impl_->newest_records(count);
}

}  // namespace dcpp
