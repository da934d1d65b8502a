#include <dcpp/state_dict/model_optimizer_state_dict.h>

namespace dcpp {

std::pair<StateDict, StateDict> get_state_dict(const ModelLayout& layout,
                                               torch::optim::Optimizer& optimizer,
                                               const StateDictOptions& options) {
  StateDict model = get_model_state_dict(layout, options);
  StateDict optim = get_optimizer_state_dict(layout, optimizer, options);
  return {std::move(model), std::move(optim)};
}

IncompatibleKeys set_state_dict(const ModelLayout& layout, torch::optim::Optimizer& optimizer,
                                const StateDict& model_state_dict,
                                const StateDict& optimizer_state_dict,
                                const StateDictOptions& options) {
  IncompatibleKeys keys = set_model_state_dict(layout, model_state_dict, options);
  set_optimizer_state_dict(layout, optimizer, optimizer_state_dict, options);
  return keys;
}

}  // namespace dcpp
