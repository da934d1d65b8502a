#pragma once
// Storage writers for the async tests: one that holds its upload until the test opens a gate, one
// that fails; and a state dict of every kind with a way to change every byte of it.

#include <dcpp/async/async_checkpointer.h>
#include <dcpp/planner/save_planner.h>
#include <dcpp/state_dict/stateful.h>
#include <dcpp/storage/storage_writer.h>

#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace dcpp::test {

/// A one-shot latch: wait() blocks until open() was called (before or after).
class Gate {
 public:
  void open() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      open_ = true;
    }
    opened_.notify_all();
  }
  void wait() {
    std::unique_lock<std::mutex> lock(mutex_);
    opened_.wait(lock, [this] { return open_; });
  }

 private:
  std::mutex mutex_;
  std::condition_variable opened_;
  bool open_ = false;
};

/// Delegates to `inner`, but write_data first opens `entered` and waits for `release`: the upload
/// is held at the point where it would read the staged bytes until the test says so.
class GatedWriter : public StorageWriter {
 public:
  GatedWriter(std::unique_ptr<StorageWriter> inner, std::shared_ptr<Gate> release)
      : inner_(std::move(inner)), release_(std::move(release)) {}
  void set_up(int rank, bool is_coordinator) override { inner_->set_up(rank, is_coordinator); }
  std::vector<SavePlan> prepare_global_plan(std::vector<SavePlan> plans) override {
    return inner_->prepare_global_plan(std::move(plans));
  }
  std::vector<WriteResult> write_data(const SavePlan& plan, SavePlanner& planner) override {
    entered.open();
    release_->wait();
    return inner_->write_data(plan, planner);
  }
  void finish(Metadata metadata, const std::vector<std::vector<WriteResult>>& results) override {
    inner_->finish(std::move(metadata), results);
  }
  Gate entered;

 private:
  std::unique_ptr<StorageWriter> inner_;
  std::shared_ptr<Gate> release_;
};

/// Fails in write_data with "disk on fire".
class FailingWriter : public StorageWriter {
 public:
  void set_up(int, bool) override {}
  std::vector<SavePlan> prepare_global_plan(std::vector<SavePlan> plans) override { return plans; }
  std::vector<WriteResult> write_data(const SavePlan&, SavePlanner&) override {
    throw CheckpointError(dcpp::ErrorKind::kIo, "disk on fire");
  }
  void finish(Metadata, const std::vector<std::vector<WriteResult>>&) override {}
};

/// A Stateful with a tensor and a counter.
class Counter : public Stateful {
 public:
  explicit Counter(at::Tensor weight) : weight(std::move(weight)) {}
  StateDict state_dict() override {
    StateDict sd;
    sd.insert("weight", weight);
    sd.insert("count", count);
    return sd;
  }
  void load_state_dict(const StateDict& sd) override { count = sd.at("count").value().toInt(); }
  at::Tensor weight;
  int64_t count = 0;
};

/// A state dict of every kind dcpp stages: tensors of several dtypes (one non-contiguous, one
/// large enough for many pieces), a ShardedTensor of two shards, nested dicts and lists, plain
/// values and a Stateful.
struct MixedState {
  explicit MixedState(int64_t seed);
  StateDict state;
  std::shared_ptr<Counter> counter;
  /// What a checkpoint of `state` saved now must hold: dotted key -> tensor (full tensor for the
  /// sharded one), cloned now.
  std::map<std::string, at::Tensor> expected_tensors() const;
  /// Changes every byte of every tensor (through plain pointer writes that ThreadSanitizer sees)
  /// and the counter.
  void mutate_everything();

 private:
  std::vector<at::Tensor> bases_;  // the storage behind every tensor and shard
};

/// Every tensor of the checkpoint in `directory`, by dotted key.
std::map<std::string, at::Tensor> load_tensors(const std::string& directory);

}  // namespace dcpp::test
