#include <dcpp/state_dict/stateful_adapters.h>

#include <dcpp/core/checkpoint_error.h>
#include <dcpp/state_dict/model_optimizer_state_dict.h>
#include <dcpp/state_dict/optimizer_state_codec.h>

namespace dcpp {

namespace {

void require_layout(const std::shared_ptr<const ModelLayout>& layout, const char* what) {
  if (!layout) {
    throw CheckpointError(ErrorKind::kUsage, std::string(what) + ": the layout must not be null");
  }
}

// Whether `key` of an optimizer state dict (either layout: "param_groups.0.<option>" or
// "param_groups.<fqn>.<option>") is an option an older PyTorch's optimizer lacks
// (OptimizerStateCodec::optional_options).
bool optional_optimizer_key(const torch::optim::Optimizer& optimizer, const std::string& key) {
  const std::string prefix = "param_groups.";
  if (key.compare(0, prefix.size(), prefix) != 0) {
    return false;
  }
  for (const std::string& option : find_optimizer_state_codec(optimizer)->optional_options()) {
    const std::string suffix = "." + option;
    if (key.size() > prefix.size() + suffix.size() &&
        key.compare(key.size() - suffix.size(), suffix.size(), suffix) == 0) {
      return true;
    }
  }
  return false;
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
                    std::shared_ptr<torch::optim::Optimizer> optimizer, StateDictOptions options)
      : layout_(std::move(layout)), optimizer_(std::move(optimizer)), options_(options) {}
  StateDict state_dict() override {
    return get_optimizer_state_dict(*layout_, *optimizer_, options_);
  }
  void load_state_dict(const StateDict& state_dict) override {
    set_optimizer_state_dict(*layout_, *optimizer_, state_dict, options_);
  }
  bool may_be_missing(const std::string& key) const override {
    return optional_optimizer_key(*optimizer_, key);
  }

 private:
  std::shared_ptr<const ModelLayout> layout_;
  std::shared_ptr<torch::optim::Optimizer> optimizer_;
  StateDictOptions options_;
};

class AppStateful final : public Stateful {
 public:
  AppStateful(std::shared_ptr<const ModelLayout> layout,
              std::shared_ptr<torch::optim::Optimizer> optimizer, StateDictOptions options)
      : layout_(std::move(layout)), optimizer_(std::move(optimizer)), options_(options) {}
  StateDict state_dict() override {
    auto [model, optim] = get_state_dict(*layout_, *optimizer_, options_);
    StateDict out;
    out.insert("model", std::move(model));
    out.insert("optim", std::move(optim));
    return out;
  }
  void load_state_dict(const StateDict& state_dict) override {
    set_state_dict(*layout_, *optimizer_, state_dict.at("model").dict(),
                   state_dict.at("optim").dict(), options_);
  }
  bool may_be_missing(const std::string& key) const override {
    const std::string prefix = "optim.";
    return key.compare(0, prefix.size(), prefix) == 0 &&
           optional_optimizer_key(*optimizer_, key.substr(prefix.size()));
  }

 private:
  std::shared_ptr<const ModelLayout> layout_;
  std::shared_ptr<torch::optim::Optimizer> optimizer_;
  StateDictOptions options_;
};

void require_optimizer(const std::shared_ptr<torch::optim::Optimizer>& optimizer,
                       const char* what) {
  if (!optimizer) {
    throw CheckpointError(ErrorKind::kUsage,
                          std::string(what) + ": the optimizer must not be null");
  }
}

// A reference as a shared_ptr that owns nothing: the deprecated overloads' promise (the caller
// keeps the object alive).
template <typename T>
std::shared_ptr<T> unowned(T& object) {
  return std::shared_ptr<T>(std::shared_ptr<T>(), &object);
}

}  // namespace

std::shared_ptr<Stateful> make_model_stateful(std::shared_ptr<const ModelLayout> layout,
                                              const StateDictOptions& options) {
  require_layout(layout, "make_model_stateful");
  return std::make_shared<ModelStateful>(std::move(layout), options);
}

std::shared_ptr<Stateful> make_optimizer_stateful(
    std::shared_ptr<const ModelLayout> layout, std::shared_ptr<torch::optim::Optimizer> optimizer,
    const StateDictOptions& options) {
  require_layout(layout, "make_optimizer_stateful");
  require_optimizer(optimizer, "make_optimizer_stateful");
  return std::make_shared<OptimizerStateful>(std::move(layout), std::move(optimizer), options);
}

std::shared_ptr<Stateful> make_app_stateful(std::shared_ptr<const ModelLayout> layout,
                                            std::shared_ptr<torch::optim::Optimizer> optimizer,
                                            const StateDictOptions& options) {
  require_layout(layout, "make_app_stateful");
  require_optimizer(optimizer, "make_app_stateful");
  return std::make_shared<AppStateful>(std::move(layout), std::move(optimizer), options);
}

std::shared_ptr<Stateful> make_optimizer_stateful(std::shared_ptr<const ModelLayout> layout,
                                                  torch::optim::Optimizer& optimizer,
                                                  const StateDictOptions& options) {
  return make_optimizer_stateful(std::move(layout), unowned(optimizer), options);
}

std::shared_ptr<Stateful> make_app_state(std::shared_ptr<const ModelLayout> layout,
                                         torch::optim::Optimizer& optimizer,
                                         const StateDictOptions& options) {
  return make_app_stateful(std::move(layout), unowned(optimizer), options);
}

}  // namespace dcpp
