#include <dcpp/state_dict/stateful_adapters.h>

#include <dcpp/core/checkpoint_error.h>
#include <dcpp/state_dict/model_optimizer_state_dict.h>

namespace dcpp {

namespace {

void require_layout(const std::shared_ptr<const ModelLayout>& layout, const char* what) {
  if (!layout) {
    throw CheckpointError(std::string(what) + ": the layout must not be null");
  }
}

class ModelStateful final : public Stateful {
 public:
  ModelStateful(std::shared_ptr<const ModelLayout> layout, StateDictOptions options)
      : layout_(std::move(layout)), options_(options) {}
  StateDict state_dict() override { return get_model_state_dict(*layout_, options_); }
  void load_state_dict(const StateDict& state_dict) override {
    set_model_state_dict(*layout_, state_dict, options_);
  }

 private:
  std::shared_ptr<const ModelLayout> layout_;
  StateDictOptions options_;
};

class OptimizerStateful final : public Stateful {
 public:
  OptimizerStateful(std::shared_ptr<const ModelLayout> layout,
                    torch::optim::Optimizer& optimizer, StateDictOptions options)
      : layout_(std::move(layout)), optimizer_(optimizer), options_(options) {}
  StateDict state_dict() override {
    return get_optimizer_state_dict(*layout_, optimizer_, options_);
  }
  void load_state_dict(const StateDict& state_dict) override {
    set_optimizer_state_dict(*layout_, optimizer_, state_dict, options_);
  }

 private:
  std::shared_ptr<const ModelLayout> layout_;
  torch::optim::Optimizer& optimizer_;
  StateDictOptions options_;
};

class AppState final : public Stateful {
 public:
  AppState(std::shared_ptr<const ModelLayout> layout, torch::optim::Optimizer& optimizer,
           StateDictOptions options)
      : layout_(std::move(layout)), optimizer_(optimizer), options_(options) {}
  StateDict state_dict() override {
    auto [model, optim] = get_state_dict(*layout_, optimizer_, options_);
    StateDict out;
    out.insert("model", std::move(model));
    out.insert("optim", std::move(optim));
    return out;
  }
  void load_state_dict(const StateDict& state_dict) override {
    set_state_dict(*layout_, optimizer_, state_dict.at("model").dict(),
                   state_dict.at("optim").dict(), options_);
  }

 private:
  std::shared_ptr<const ModelLayout> layout_;
  torch::optim::Optimizer& optimizer_;
  StateDictOptions options_;
};

}  // namespace

std::shared_ptr<Stateful> make_model_stateful(std::shared_ptr<const ModelLayout> layout,
                                              const StateDictOptions& options) {
  require_layout(layout, "make_model_stateful");
  return std::make_shared<ModelStateful>(std::move(layout), options);
}

std::shared_ptr<Stateful> make_optimizer_stateful(std::shared_ptr<const ModelLayout> layout,
                                                  torch::optim::Optimizer& optimizer,
                                                  const StateDictOptions& options) {
  require_layout(layout, "make_optimizer_stateful");
  return std::make_shared<OptimizerStateful>(std::move(layout), optimizer, options);
}

std::shared_ptr<Stateful> make_app_state(std::shared_ptr<const ModelLayout> layout,
                                         torch::optim::Optimizer& optimizer,
                                         const StateDictOptions& options) {
  require_layout(layout, "make_app_state");
  return std::make_shared<AppState>(std::move(layout), optimizer, options);
}

}  // namespace dcpp
