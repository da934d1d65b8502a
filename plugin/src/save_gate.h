#pragma once
// A StorageWriter that checks, on every rank, whether a managed save may start before it
// makes and sets up the writer it wraps: a check that throws fails the save's first step, whose
// outcome every rank learns, so every rank fails that save at once without a collective of its
// own. The manager's disk check (a root about to fill up) goes through it.

#include <dcpp/storage/storage_writer.h>

#include <functional>
#include <memory>

namespace dcpp::detail {

class SaveGate final : public StorageWriter {
 public:
  /// `check` runs in set_up (on every rank: it decides where it has anything to check), then
  /// `make`, whose writer gets every call that follows.
  SaveGate(std::function<void()> check, std::function<std::unique_ptr<StorageWriter>()> make);

  void set_up(int rank, bool is_coordinator) override;
  SavePlan prepare_local_plan(SavePlan plan) override;
  std::vector<SavePlan> prepare_global_plan(std::vector<SavePlan> plans) override;
  std::vector<WriteResult> write_data(const SavePlan& plan, SavePlanner& planner) override;
  void finish(Metadata metadata, const std::vector<std::vector<WriteResult>>& results) override;
  /// The wrapped writer's, when it was made (a check that failed made none).
  void abort_save() override;

 private:
  StorageWriter& inner();

  std::function<void()> check_;
  std::function<std::unique_ptr<StorageWriter>()> make_;
  std::unique_ptr<StorageWriter> inner_;
};

}  // namespace dcpp::detail
