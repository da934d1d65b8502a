#pragma once
// Every rank's part of a read-once load once the plans are final: keep a copy of what this rank
// reads for others while it reads, then follow the schedule, sending those copies and receiving
// into this rank's state dict what others read for it.

#include "read_once_schedule.h"

#include "dist/collectives.h"

#include <dcpp/planner/load_planner.h>

#include <memory>

namespace dcpp::detail {

/// A LoadPlanner that forwards to `planner` and keeps a copy of the bytes of every item that
/// `schedule` has this rank send: the box of a tensor as storage held it (contiguous, on the CPU,
/// in the dtype `metadata` gives: a box whose destination here has another dtype is read into a
/// scratch tensor of the saved dtype, kept, then copied over), or a value (re-encoded as a
/// `torch.save` archive). Receivers convert from the saved dtype into theirs, so ranks whose
/// destinations differ in dtype each get what reading storage would have given them. The copies
/// live as long as this object. Its read callbacks may be called from several threads at once, as
/// the storage reader's are.
class StashingLoadPlanner final : public LoadPlanner {
 public:
  StashingLoadPlanner(LoadPlanner& planner, int rank, const ReadOnceSchedule& schedule,
                      const Metadata& metadata);
  ~StashingLoadPlanner() override;

  void set_up(StateDict& state_dict, const Metadata& metadata, bool is_coordinator) override;
  LoadPlan create_local_plan() override;
  std::vector<LoadPlan> create_global_plan(std::vector<LoadPlan> plans) override;
  LoadPlan finish_plan(LoadPlan central_plan) override;
  at::Tensor resolve_tensor(const ReadItem& item) override;
  void commit_tensor(const ReadItem& item, const at::Tensor& tensor) override;
  void load_bytes(const ReadItem& item, c10::IValue value) override;
  IncompatibleKeys report() const override;

  /// The copy of the item's saved box; nullptr when none was kept (it was not read). Once the
  /// reads are done: a later read callback may move the copies.
  const std::string* find(const ReadItem& item) const;

 private:
  struct Stash;
  LoadPlanner& planner_;
  std::unique_ptr<Stash> stash_;
};

/// Runs this rank's transfers of `schedule` in order: sends the copies `stash` kept, and hands
/// what it receives to `planner` as the storage reader would (resolve_tensor, then commit_tensor;
/// load_bytes), a box converted from its saved dtype (`metadata`) into the destination's. A
/// transfer this rank cannot complete (a box of an unexpected size, a value that does not decode, a
/// planner that throws) does not stop it: it still receives every message the schedule has for it,
/// so that no sender waits for it in vain, and then throws the first failure. A sender that lacks a
/// copy tells its receiver so, and both throw. Every rank must call it with its schedule from the
/// same load.
void exchange_read_once(Collectives& ranks, const ReadOnceSchedule& schedule,
                        const StashingLoadPlanner* stash, LoadPlanner& planner,
                        const Metadata& metadata);

}  // namespace dcpp::detail
