#include "save_gate.h"

#include <dcpp/core/checkpoint_error.h>

namespace dcpp::detail {

SaveGate::SaveGate(std::function<void()> check,
                   std::function<std::unique_ptr<StorageWriter>()> make)
    : check_(std::move(check)), make_(std::move(make)) {}

void SaveGate::set_up(int rank, bool is_coordinator) {
  if (check_) check_();
  inner_ = make_();
  inner_->set_up(rank, is_coordinator);
}

StorageWriter& SaveGate::inner() {
  if (!inner_) {
    throw CheckpointError(ErrorKind::kUsage, "a managed save's writer was used before set_up");
  }
  return *inner_;
}

SavePlan SaveGate::prepare_local_plan(SavePlan plan) {
  return inner().prepare_local_plan(std::move(plan));
}

std::vector<SavePlan> SaveGate::prepare_global_plan(std::vector<SavePlan> plans) {
  return inner().prepare_global_plan(std::move(plans));
}

std::vector<WriteResult> SaveGate::write_data(const SavePlan& plan, SavePlanner& planner) {
  return inner().write_data(plan, planner);
}

void SaveGate::finish(Metadata metadata, const std::vector<std::vector<WriteResult>>& results) {
  inner().finish(std::move(metadata), results);
}

void SaveGate::abort_save() {
  if (inner_) inner_->abort_save();
}

}  // namespace dcpp::detail
