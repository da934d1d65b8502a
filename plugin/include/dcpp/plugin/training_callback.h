#pragma once
// TrainingCallback: the hooks a C++ training loop calls, and CallbackList to call several.

#include <dcpp/core/export.h>
#include <dcpp/plugin/training_context.h>

#include <exception>
#include <memory>
#include <vector>

namespace dcpp {

/// Hooks of a training loop, all called on the training thread with the loop's context. Every
/// hook does nothing by default. A hook may throw (the loop decides what to do; on_exception is
/// for cleaning up, and should not throw).
class DCPP_API TrainingCallback {
 public:
  virtual ~TrainingCallback() = default;
  /// Before the first step (a checkpoint callback resumes here: context.step may change).
  virtual void on_train_begin(TrainingContext& context) {}
  /// Before each optimizer step (after the forward and backward), the last moment before the
  /// state's tensors change: a checkpoint copying them in the background finishes here.
  virtual void on_before_optimizer_step(TrainingContext& context) {}
  /// After each optimizer step, once context.step counts it and context.metrics hold its values.
  virtual void on_step_end(TrainingContext& context) {}
  virtual void on_epoch_end(TrainingContext& context) {}
  /// After the last step (also after a stop requested through the context).
  virtual void on_train_end(TrainingContext& context) {}
  /// When the loop fails with `error`; the loop rethrows it after the callbacks ran.
  virtual void on_exception(TrainingContext& context, std::exception_ptr error) {}
};

/// Calls each callback's hook in order (on_exception: all of them, swallowing their errors).
class DCPP_API CallbackList : public TrainingCallback {
 public:
  CallbackList() = default;
  explicit CallbackList(std::vector<std::shared_ptr<TrainingCallback>> callbacks)
      : callbacks_(std::move(callbacks)) {}
  void add(std::shared_ptr<TrainingCallback> callback) {
    callbacks_.push_back(std::move(callback));
  }

  void on_train_begin(TrainingContext& context) override {
    for (auto& c : callbacks_) c->on_train_begin(context);
  }
  void on_before_optimizer_step(TrainingContext& context) override {
    for (auto& c : callbacks_) c->on_before_optimizer_step(context);
  }
  void on_step_end(TrainingContext& context) override {
    for (auto& c : callbacks_) c->on_step_end(context);
  }
  void on_epoch_end(TrainingContext& context) override {
    for (auto& c : callbacks_) c->on_epoch_end(context);
  }
  void on_train_end(TrainingContext& context) override {
    for (auto& c : callbacks_) c->on_train_end(context);
  }
  void on_exception(TrainingContext& context, std::exception_ptr error) override {
    for (auto& c : callbacks_) {
      try {
        c->on_exception(context, error);
      } catch (...) {
      }
    }
  }

 private:
  std::vector<std::shared_ptr<TrainingCallback>> callbacks_;
};

}  // namespace dcpp
