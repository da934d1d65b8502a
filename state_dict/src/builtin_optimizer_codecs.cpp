// Codecs of libtorch's optimizers. Names and types follow Python's optimizers
// (`optimizer.state_dict()`), so Python's set_optimizer_state_dict reads what these write:
//   state:   Adam/AdamW {step: float32 0-d tensor, exp_avg, exp_avg_sq[, max_exp_avg_sq]}
//            SGD {momentum_buffer} (momentum != 0 only)   Adagrad {step, sum}
//            RMSprop {step, square_avg[, momentum_buffer][, grad_avg]}
//            LBFGS (first parameter only) {func_evals, n_iter[, d, t, old_dirs, old_stps, ro,
//            H_diag, prev_flat_grad, prev_loss[, al]]}
//   options: the keys of every PyTorch from 2.6 to 2.14 (the newest's `defaults`, in its order),
//            Python-only ones (maximize, foreach, capturable, differentiable, fused,
//            decoupled_weight_decay) with what libtorch does, so every version's strict dcp.load
//            finds its keys. Keys 2.6 lacks (Adam/AdamW decoupled_weight_decay, LBFGS maximize)
//            are optional_options(): checkpoints of 2.6 load without them. docs/state_dict.md has
//            the table.

#include "builtin_optimizer_codecs.h"

#include <dcpp/core/checkpoint_error.h>

#include <ATen/ATen.h>
#include <torch/optim/adagrad.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/lbfgs.h>
#include <torch/optim/rmsprop.h>
#include <torch/optim/sgd.h>

#include <functional>
#include <sstream>

namespace dcpp::detail {

namespace {

using torch::optim::OptimizerOptions;
using torch::optim::OptimizerParamState;

at::Tensor step_tensor(int64_t step) {
  return at::scalar_tensor(static_cast<double>(step), at::TensorOptions().dtype(at::kFloat));
}

// Calls `apply` with the value of `key` when `saved` has it.
void with(const StateDict& saved, const std::string& key,
          const std::function<void(const StateValue&)>& apply) {
  if (const StateValue* value = saved.find(key)) {
    apply(*value);
  }
}

bool is_none(const StateValue& v) { return v.is_value() && v.value().isNone(); }

// A number as a message shows it: 0.9, not 0.900000.
std::string number_text(double value) {
  std::ostringstream out;
  out << value;
  return out.str();
}

// A Python-only flag libtorch always behaves as false: true cannot be honoured.
void require_false(const StateDict& saved, const std::string& key, const std::string& optimizer) {
  with(saved, key, [&](const StateValue& v) {
    if (!is_none(v) && state_bool(v, key)) {
      throw CheckpointError(ErrorKind::kIncompatible,
                            "the saved " + optimizer + " param group has " + key +
                                "=True, which libtorch's " + optimizer +
                                " does not implement; set it to False in Python before saving");
    }
  });
}

double number(const StateDict& saved, const std::string& key, double current) {
  const StateValue* value = saved.find(key);
  return value == nullptr ? current : state_number(*value, key);
}

std::tuple<double, double> betas_of(const StateDict& saved, std::tuple<double, double> current) {
  const StateValue* value = saved.find("betas");
  if (value == nullptr) {
    return current;
  }
  std::vector<double> items;
  if (value->is_value() && value->value().isTuple()) {
    for (const c10::IValue& element : value->value().toTupleRef().elements()) {
      items.push_back(state_number(StateValue(element), "betas"));
    }
  } else if (value->is_list()) {
    for (const StateValue& element : value->list()) {
      items.push_back(state_number(element, "betas"));
    }
  } else if (value->is_value() && value->value().isList()) {
    for (const c10::IValue& element : value->value().toListRef()) {
      items.push_back(state_number(StateValue(element), "betas"));
    }
  }
  if (items.size() != 2) {
    throw CheckpointError(ErrorKind::kIncompatible,
                          "optimizer option 'betas' must be a pair of numbers, got a " +
                              std::string(value->kind_name()));
  }
  return std::make_tuple(items[0], items[1]);
}

c10::IValue pair(const std::tuple<double, double>& values) {
  return c10::ivalue::Tuple::create({std::get<0>(values), std::get<1>(values)});
}

// A tensor from an optional state key: undefined when absent or None.
at::Tensor optional_tensor(const StateDict& state, const std::string& key) {
  const StateValue* value = state.find(key);
  if (value == nullptr || (value->is_value() && value->value().isNone())) {
    return {};
  }
  return state_tensor(*value, key);
}

// ---- Adam and AdamW --------------------------------------------------------------------------

// PyTorch 2.14's Adam has decoupled_weight_decay (True: AdamW's rule) and its AdamW is an Adam
// with it True; 2.6's have neither the key nor a shared order (AdamW: foreach before maximize).
template <typename Options, typename State>
class AdamFamilyCodec final : public OptimizerStateCodec {
 public:
  // `decoupled_weight_decay`: whether this libtorch optimizer decays weights as AdamW does.
  AdamFamilyCodec(std::string name, bool decoupled_weight_decay)
      : name_(std::move(name)), decoupled_weight_decay_(decoupled_weight_decay) {}
  std::string name() const override { return name_; }

  StateDict encode_state(const OptimizerParamState& base) const override {
    const auto& state = static_cast<const State&>(base);
    StateDict out;
    out.insert("step", step_tensor(state.step()));
    out.insert("exp_avg", state.exp_avg());
    out.insert("exp_avg_sq", state.exp_avg_sq());
    if (state.max_exp_avg_sq().defined()) {
      out.insert("max_exp_avg_sq", state.max_exp_avg_sq());
    }
    return out;
  }

  std::unique_ptr<OptimizerParamState> decode_state(const StateDict& in,
                                                    const at::Tensor& /*param*/) const override {
    auto state = std::make_unique<State>();
    state->step(state_int(required(in, "step"), "step"));
    state->exp_avg(state_tensor(required(in, "exp_avg"), "exp_avg"));
    state->exp_avg_sq(state_tensor(required(in, "exp_avg_sq"), "exp_avg_sq"));
    state->max_exp_avg_sq(optional_tensor(in, "max_exp_avg_sq"));
    return state;
  }

  StateDict encode_options(const OptimizerOptions& base) const override {
    const auto& options = static_cast<const Options&>(base);
    StateDict out;
    out.insert("lr", options.lr());
    out.insert("betas", pair(options.betas()));
    out.insert("eps", options.eps());
    out.insert("weight_decay", options.weight_decay());
    out.insert("amsgrad", options.amsgrad());
    out.insert("maximize", false);
    out.insert("foreach", c10::IValue());
    out.insert("capturable", false);
    out.insert("differentiable", false);
    out.insert("fused", c10::IValue());
    out.insert("decoupled_weight_decay", decoupled_weight_decay_);
    return out;
  }

  void decode_options(const StateDict& saved, OptimizerOptions& base) const override {
    auto& options = static_cast<Options&>(base);
    options.lr(number(saved, "lr", options.lr()));
    options.betas(betas_of(saved, options.betas()));
    options.eps(number(saved, "eps", options.eps()));
    options.weight_decay(number(saved, "weight_decay", options.weight_decay()));
    with(saved, "amsgrad", [&](const StateValue& v) { options.amsgrad(state_bool(v, "amsgrad")); });
    require_false(saved, "maximize", name_);
    // AdamW takes either value, as Python's AdamW does (its __setstate__ sets it to True for any
    // state loaded into it); Adam cannot decay weights as AdamW does.
    if (!decoupled_weight_decay_) {
      with(saved, "decoupled_weight_decay", [&](const StateValue& v) {
        if (!is_none(v) && state_bool(v, "decoupled_weight_decay")) {
          throw CheckpointError(
              ErrorKind::kIncompatible,
              "the saved " + name_ +
                  " param group has decoupled_weight_decay=True: Python's Adam then decays weights "
                  "as AdamW does, which libtorch's " +
                  name_ + " does not implement; use torch::optim::AdamW to load this checkpoint");
        }
      });
    }
  }

  std::vector<std::string> optional_options() const override { return {"decoupled_weight_decay"}; }

  std::vector<KeptState> state_kept_with(const OptimizerOptions& base) const override {
    if (!static_cast<const Options&>(base).amsgrad()) return {};
    return {{"max_exp_avg_sq", "amsgrad true"}};
  }

 private:
  std::string name_;
  bool decoupled_weight_decay_;
};

// ---- SGD -------------------------------------------------------------------------------------

class SGDCodec final : public OptimizerStateCodec {
 public:
  std::string name() const override { return "SGD"; }

  StateDict encode_state(const OptimizerParamState& base) const override {
    const auto& state = static_cast<const torch::optim::SGDParamState&>(base);
    StateDict out;
    out.insert("momentum_buffer", state.momentum_buffer().defined()
                                      ? StateValue(state.momentum_buffer())
                                      : StateValue());
    return out;
  }

  std::unique_ptr<OptimizerParamState> decode_state(const StateDict& in,
                                                    const at::Tensor& /*param*/) const override {
    auto state = std::make_unique<torch::optim::SGDParamState>();
    state->momentum_buffer(optional_tensor(in, "momentum_buffer"));
    return state;
  }

  StateDict encode_options(const OptimizerOptions& base) const override {
    const auto& options = static_cast<const torch::optim::SGDOptions&>(base);
    StateDict out;
    out.insert("lr", options.lr());
    out.insert("momentum", options.momentum());
    out.insert("dampening", options.dampening());
    out.insert("weight_decay", options.weight_decay());
    out.insert("nesterov", options.nesterov());
    out.insert("maximize", false);
    out.insert("foreach", c10::IValue());
    out.insert("differentiable", false);
    out.insert("fused", c10::IValue());
    return out;
  }

  void decode_options(const StateDict& saved, OptimizerOptions& base) const override {
    auto& options = static_cast<torch::optim::SGDOptions&>(base);
    options.lr(number(saved, "lr", options.lr()));
    options.momentum(number(saved, "momentum", options.momentum()));
    options.dampening(number(saved, "dampening", options.dampening()));
    options.weight_decay(number(saved, "weight_decay", options.weight_decay()));
    with(saved, "nesterov",
         [&](const StateValue& v) { options.nesterov(state_bool(v, "nesterov")); });
    require_false(saved, "maximize", name());
  }

  std::vector<KeptState> state_kept_with(const OptimizerOptions& base) const override {
    const double momentum = static_cast<const torch::optim::SGDOptions&>(base).momentum();
    if (momentum == 0) return {};
    return {{"momentum_buffer", "momentum " + number_text(momentum)}};
  }
};

// ---- Adagrad ---------------------------------------------------------------------------------

class AdagradCodec final : public OptimizerStateCodec {
 public:
  std::string name() const override { return "Adagrad"; }

  StateDict encode_state(const OptimizerParamState& base) const override {
    const auto& state = static_cast<const torch::optim::AdagradParamState&>(base);
    StateDict out;
    out.insert("step", step_tensor(state.step()));
    out.insert("sum", state.sum());
    return out;
  }

  std::unique_ptr<OptimizerParamState> decode_state(const StateDict& in,
                                                    const at::Tensor& /*param*/) const override {
    auto state = std::make_unique<torch::optim::AdagradParamState>();
    state->step(state_int(required(in, "step"), "step"));
    state->sum(state_tensor(required(in, "sum"), "sum"));
    return state;
  }

  StateDict encode_options(const OptimizerOptions& base) const override {
    const auto& options = static_cast<const torch::optim::AdagradOptions&>(base);
    StateDict out;
    out.insert("lr", options.lr());
    out.insert("lr_decay", options.lr_decay());
    out.insert("eps", options.eps());
    out.insert("weight_decay", options.weight_decay());
    out.insert("initial_accumulator_value", options.initial_accumulator_value());
    out.insert("foreach", c10::IValue());
    out.insert("maximize", false);
    out.insert("differentiable", false);
    out.insert("fused", c10::IValue());
    return out;
  }

  void decode_options(const StateDict& saved, OptimizerOptions& base) const override {
    auto& options = static_cast<torch::optim::AdagradOptions&>(base);
    options.lr(number(saved, "lr", options.lr()));
    options.lr_decay(number(saved, "lr_decay", options.lr_decay()));
    options.eps(number(saved, "eps", options.eps()));
    options.weight_decay(number(saved, "weight_decay", options.weight_decay()));
    options.initial_accumulator_value(
        number(saved, "initial_accumulator_value", options.initial_accumulator_value()));
    require_false(saved, "maximize", name());
  }
};

// ---- RMSprop ---------------------------------------------------------------------------------

class RMSpropCodec final : public OptimizerStateCodec {
 public:
  std::string name() const override { return "RMSprop"; }

  StateDict encode_state(const OptimizerParamState& base) const override {
    const auto& state = static_cast<const torch::optim::RMSpropParamState&>(base);
    StateDict out;
    out.insert("step", step_tensor(state.step()));
    out.insert("square_avg", state.square_avg());
    if (state.momentum_buffer().defined()) {
      out.insert("momentum_buffer", state.momentum_buffer());
    }
    if (state.grad_avg().defined()) {
      out.insert("grad_avg", state.grad_avg());
    }
    return out;
  }

  std::unique_ptr<OptimizerParamState> decode_state(const StateDict& in,
                                                    const at::Tensor& /*param*/) const override {
    auto state = std::make_unique<torch::optim::RMSpropParamState>();
    state->step(state_int(required(in, "step"), "step"));
    state->square_avg(state_tensor(required(in, "square_avg"), "square_avg"));
    state->momentum_buffer(optional_tensor(in, "momentum_buffer"));
    state->grad_avg(optional_tensor(in, "grad_avg"));
    return state;
  }

  StateDict encode_options(const OptimizerOptions& base) const override {
    const auto& options = static_cast<const torch::optim::RMSpropOptions&>(base);
    StateDict out;
    out.insert("lr", options.lr());
    out.insert("momentum", options.momentum());
    out.insert("alpha", options.alpha());
    out.insert("eps", options.eps());
    out.insert("centered", options.centered());
    out.insert("weight_decay", options.weight_decay());
    out.insert("capturable", false);
    out.insert("foreach", c10::IValue());
    out.insert("maximize", false);
    out.insert("differentiable", false);
    return out;
  }

  void decode_options(const StateDict& saved, OptimizerOptions& base) const override {
    auto& options = static_cast<torch::optim::RMSpropOptions&>(base);
    options.lr(number(saved, "lr", options.lr()));
    options.momentum(number(saved, "momentum", options.momentum()));
    options.alpha(number(saved, "alpha", options.alpha()));
    options.eps(number(saved, "eps", options.eps()));
    with(saved, "centered",
         [&](const StateValue& v) { options.centered(state_bool(v, "centered")); });
    options.weight_decay(number(saved, "weight_decay", options.weight_decay()));
    require_false(saved, "maximize", name());
  }

  std::vector<KeptState> state_kept_with(const OptimizerOptions& base) const override {
    const auto& options = static_cast<const torch::optim::RMSpropOptions&>(base);
    std::vector<KeptState> kept;
    if (options.momentum() > 0) {
      kept.push_back({"momentum_buffer", "momentum " + number_text(options.momentum())});
    }
    if (options.centered()) kept.push_back({"grad_avg", "centered true"});
    return kept;
  }
};

// ---- LBFGS -----------------------------------------------------------------------------------

StateList tensor_list(const std::deque<at::Tensor>& tensors) {
  StateList out;
  for (const at::Tensor& t : tensors) {
    out.push_back(t);
  }
  return out;
}

// The tensors of a saved list (a StateList, or a list value), None elements undefined.
std::vector<at::Tensor> tensors_of(const StateValue& value, const std::string& key) {
  std::vector<at::Tensor> out;
  auto add = [&](const StateValue& element) {
    out.push_back(element.is_value() && element.value().isNone() ? at::Tensor()
                                                                 : state_tensor(element, key));
  };
  if (value.is_list()) {
    for (const StateValue& element : value.list()) {
      add(element);
    }
  } else if (value.is_value() && value.value().isList()) {
    for (const c10::IValue& element : value.value().toListRef()) {
      add(StateValue(element));
    }
  } else {
    throw CheckpointError(ErrorKind::kIncompatible, "optimizer state '" + key + "' is a " +
                                                        value.kind_name() + ", not a list");
  }
  return out;
}

class LBFGSCodec final : public OptimizerStateCodec {
 public:
  std::string name() const override { return "LBFGS"; }

  StateDict encode_state(const OptimizerParamState& base) const override {
    const auto& state = static_cast<const torch::optim::LBFGSParamState&>(base);
    StateDict out;
    out.insert("func_evals", state.func_evals());
    out.insert("n_iter", state.n_iter());
    if (state.d().defined()) {
      out.insert("d", state.d());
      out.insert("t", state.t());
      out.insert("old_dirs", tensor_list(state.old_dirs()));
      out.insert("old_stps", tensor_list(state.old_stps()));
      out.insert("ro", tensor_list(state.ro()));
      out.insert("H_diag", state.H_diag());
      out.insert("prev_flat_grad", state.prev_flat_grad());
      out.insert("prev_loss", state.prev_loss());
      if (state.al()) {
        StateList al;
        for (const at::Tensor& t : *state.al()) {
          al.push_back(t.defined() ? StateValue(t) : StateValue());
        }
        out.insert("al", al);
      }
    }
    return out;
  }

  std::unique_ptr<OptimizerParamState> decode_state(const StateDict& in,
                                                    const at::Tensor& /*param*/) const override {
    auto state = std::make_unique<torch::optim::LBFGSParamState>();
    state->func_evals(state_int(required(in, "func_evals"), "func_evals"));
    state->n_iter(state_int(required(in, "n_iter"), "n_iter"));
    state->t(0.0);
    state->prev_loss(0.0);
    if (const StateValue* d = in.find("d")) {
      state->d(state_tensor(*d, "d"));
      state->t(state_number(required(in, "t"), "t"));
      for (const char* key : {"old_dirs", "old_stps", "ro"}) {
        std::vector<at::Tensor> tensors = tensors_of(required(in, key), key);
        std::deque<at::Tensor> deque(tensors.begin(), tensors.end());
        if (std::string(key) == "old_dirs") {
          state->old_dirs(std::move(deque));
        } else if (std::string(key) == "old_stps") {
          state->old_stps(std::move(deque));
        } else {
          state->ro(std::move(deque));
        }
      }
      state->H_diag(state_tensor(required(in, "H_diag"), "H_diag"));
      state->prev_flat_grad(state_tensor(required(in, "prev_flat_grad"), "prev_flat_grad"));
      state->prev_loss(state_number(required(in, "prev_loss"), "prev_loss"));
      if (const StateValue* al = in.find("al")) {
        if (!(al->is_value() && al->value().isNone())) {
          state->al(tensors_of(*al, "al"));
        }
      }
    }
    return state;
  }

  StateDict encode_options(const OptimizerOptions& base) const override {
    const auto& options = static_cast<const torch::optim::LBFGSOptions&>(base);
    StateDict out;
    out.insert("lr", options.lr());
    out.insert("max_iter", options.max_iter());
    // Python stores the effective value (max_iter * 5 // 4 when not given).
    out.insert("max_eval", options.max_eval() ? *options.max_eval() : options.max_iter() * 5 / 4);
    out.insert("tolerance_grad", options.tolerance_grad());
    out.insert("tolerance_change", options.tolerance_change());
    out.insert("history_size", options.history_size());
    out.insert("line_search_fn",
               options.line_search_fn() ? StateValue(*options.line_search_fn()) : StateValue());
    out.insert("maximize", false);  // newer than PyTorch 2.6 (2.14 has it)
    return out;
  }

  void decode_options(const StateDict& saved, OptimizerOptions& base) const override {
    auto& options = static_cast<torch::optim::LBFGSOptions&>(base);
    options.lr(number(saved, "lr", options.lr()));
    with(saved, "max_iter",
         [&](const StateValue& v) { options.max_iter(state_int(v, "max_iter")); });
    with(saved, "max_eval", [&](const StateValue& v) {
      if (v.is_value() && v.value().isNone()) {
        options.max_eval(c10::nullopt);
      } else {
        options.max_eval(state_int(v, "max_eval"));
      }
    });
    options.tolerance_grad(number(saved, "tolerance_grad", options.tolerance_grad()));
    options.tolerance_change(number(saved, "tolerance_change", options.tolerance_change()));
    with(saved, "history_size",
         [&](const StateValue& v) { options.history_size(state_int(v, "history_size")); });
    with(saved, "line_search_fn", [&](const StateValue& v) {
      if (v.is_value() && v.value().isString()) {
        options.line_search_fn(v.value().toStringRef());
      } else if (v.is_value() && v.value().isNone()) {
        options.line_search_fn(c10::nullopt);
      } else {
        throw CheckpointError(ErrorKind::kIncompatible, "optimizer option 'line_search_fn' is a " +
                                                            std::string(v.kind_name()) +
                                                            ", not a string or None");
      }
    });
    require_false(saved, "maximize", name());
  }

  std::vector<std::string> optional_options() const override { return {"maximize"}; }

  // Its vectors (d, prev_flat_grad, the history) are over all parameters flattened together.
  bool follows_parameter(const std::string& /*name*/) const override { return false; }

  // libtorch's LBFGS needs a closure; with zero gradients it stops after evaluating it once.
  void initialization_step(torch::optim::Optimizer& optimizer) const override {
    optimizer.step([] { return at::zeros({}); });
  }
};

}  // namespace

std::shared_ptr<const OptimizerStateCodec> builtin_optimizer_state_codec(
    const torch::optim::Optimizer& optimizer) {
  static const auto adam =
      std::make_shared<AdamFamilyCodec<torch::optim::AdamOptions, torch::optim::AdamParamState>>(
          "Adam", /*decoupled_weight_decay=*/false);
  static const auto adamw =
      std::make_shared<AdamFamilyCodec<torch::optim::AdamWOptions, torch::optim::AdamWParamState>>(
          "AdamW", /*decoupled_weight_decay=*/true);
  static const auto sgd = std::make_shared<SGDCodec>();
  static const auto adagrad = std::make_shared<AdagradCodec>();
  static const auto rmsprop = std::make_shared<RMSpropCodec>();
  static const auto lbfgs = std::make_shared<LBFGSCodec>();
  if (dynamic_cast<const torch::optim::Adam*>(&optimizer) != nullptr) {
    return adam;
  }
  if (dynamic_cast<const torch::optim::AdamW*>(&optimizer) != nullptr) {
    return adamw;
  }
  if (dynamic_cast<const torch::optim::SGD*>(&optimizer) != nullptr) {
    return sgd;
  }
  if (dynamic_cast<const torch::optim::Adagrad*>(&optimizer) != nullptr) {
    return adagrad;
  }
  if (dynamic_cast<const torch::optim::RMSprop*>(&optimizer) != nullptr) {
    return rmsprop;
  }
  if (dynamic_cast<const torch::optim::LBFGS*>(&optimizer) != nullptr) {
    return lbfgs;
  }
  return nullptr;
}

}  // namespace dcpp::detail
