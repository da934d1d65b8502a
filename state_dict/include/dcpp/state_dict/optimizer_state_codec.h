#pragma once
// The extension point for optimizers: a codec turns one libtorch optimizer's per-parameter state
// and param-group options into the names and types Python's optimizer of the same kind uses, and
// back. dcpp registers codecs for SGD, Adam, AdamW, Adagrad, RMSprop and LBFGS; register one for
// your own optimizer type to make get/set_optimizer_state_dict work with it.

#include <dcpp/core/export.h>
#include <dcpp/state_dict/state_dict.h>

#include <torch/optim/optimizer.h>

#include <memory>
#include <string>
#include <typeindex>
#include <vector>

namespace dcpp {

/// A per-parameter state entry that some options keep, and the option that keeps it
/// ({"momentum_buffer", "momentum 0.9"}).
struct DCPP_API KeptState {
  std::string entry;
  std::string because;
};

/// Converts one optimizer type's state. Implementations must be stateless (or immutable): one
/// instance serves every optimizer of its type, from any thread.
class DCPP_API OptimizerStateCodec {
 public:
  virtual ~OptimizerStateCodec() = default;

  /// The name of the optimizer for messages ("Adam").
  virtual std::string name() const = 0;

  /// One parameter's state under Python's names and types, in Python's order (e.g. Adam:
  /// "step" as a float32 0-d tensor, "exp_avg", "exp_avg_sq"). Tensors of the live state should be
  /// returned as they are (sharing storage), so that loading into the result reaches them.
  virtual StateDict encode_state(const torch::optim::OptimizerParamState& state) const = 0;

  /// A new param state from `state` (keys as encode_state writes them, or as Python writes them).
  /// Tensors in `state` are this process's own copies, already on `param`'s device and of the
  /// parameter's local shape where they follow it: the codec may keep them. Throws
  /// CheckpointError naming the missing or ill-typed key.
  virtual std::unique_ptr<torch::optim::OptimizerParamState> decode_state(
      const StateDict& state, const at::Tensor& param) const = 0;

  /// A param group's options under Python's names, in Python's order, without "params"
  /// (Python-only options such as "maximize" or "foreach" with the values libtorch behaves as).
  virtual StateDict encode_options(const torch::optim::OptimizerOptions& options) const = 0;

  /// Applies saved options to `options`: the keys libtorch knows are set; Python-only keys are
  /// accepted when they ask for what libtorch does (e.g. maximize false, any foreach) and throw
  /// CheckpointError when they ask for something libtorch cannot do (maximize true); unknown keys
  /// (e.g. a Python scheduler's "initial_lr") are ignored; absent keys keep their value.
  virtual void decode_options(const StateDict& saved,
                              torch::optim::OptimizerOptions& options) const = 0;

  /// Whether the state tensor `name` has its parameter's shape element for element, and so is
  /// sharded as the parameter is (default: true for tensors of the parameter's local shape; LBFGS
  /// says false: its vectors span all parameters).
  virtual bool follows_parameter(const std::string& name) const {
    (void)name;
    return true;
  }

  /// Option keys encode_options writes that an older Python optimizer of this kind lacks, so that
  /// a checkpoint may not hold them (Adam's "decoupled_weight_decay", new after PyTorch 2.6).
  /// make_optimizer_stateful and make_app_state let a load proceed without them
  /// (Stateful::may_be_missing); decode_options then sees them absent. Default: none.
  virtual std::vector<std::string> optional_options() const { return {}; }

  /// Per-parameter state entries a step with `options` keeps that other options of this optimizer
  /// do not (SGD with momentum: "momentum_buffer"; Adam with amsgrad: "max_exp_avg_sq").
  /// set_optimizer_state_dict refuses to restore options that keep an entry the optimizer's
  /// present options do not into a param group none of whose parameters is given that entry: the
  /// options would come back without their state (a load target made from an optimizer with other
  /// options has no place for it). Default: none.
  virtual std::vector<KeptState> state_kept_with(
      const torch::optim::OptimizerOptions& options) const {
    (void)options;
    return {};
  }

  /// One step that creates the optimizer's lazily created state, called by DCP's lazy
  /// initialization with zero gradients and a learning rate of 0. Default: optimizer.step().
  virtual void initialization_step(torch::optim::Optimizer& optimizer) const { optimizer.step(); }
};

/// Registers `codec` for optimizers whose dynamic type is exactly `optimizer_type`, replacing any
/// codec registered for it. Thread-safe.
DCPP_API void register_optimizer_state_codec(std::type_index optimizer_type,
                                             std::shared_ptr<const OptimizerStateCodec> codec);

/// register_optimizer_state_codec(typeid(OptimizerType), codec).
template <typename OptimizerType>
void register_optimizer_state_codec(std::shared_ptr<const OptimizerStateCodec> codec) {
  register_optimizer_state_codec(std::type_index(typeid(OptimizerType)), std::move(codec));
}

/// The codec for `optimizer`: the one registered for its dynamic type, else the built-in one of
/// the libtorch optimizer it derives from. Throws CheckpointError naming the type when there is
/// none. Thread-safe.
DCPP_API std::shared_ptr<const OptimizerStateCodec> find_optimizer_state_codec(
    const torch::optim::Optimizer& optimizer);

// ---- Helpers for codecs: read a saved value whatever type Python gave it ----------------------

/// A number from an int, float or bool value, or a one-element tensor. Throws CheckpointError
/// naming `key` otherwise.
DCPP_API double state_number(const StateValue& value, const std::string& key);
/// state_number rounded to an integer.
DCPP_API int64_t state_int(const StateValue& value, const std::string& key);
/// A bool from a bool (or number) value.
DCPP_API bool state_bool(const StateValue& value, const std::string& key);
/// The tensor of a tensor value (or a 0-d double tensor from a number). Throws otherwise.
DCPP_API at::Tensor state_tensor(const StateValue& value, const std::string& key);
/// `state.at(key)`, throwing CheckpointError "optimizer state has no '<key>'" when absent.
DCPP_API const StateValue& required(const StateDict& state, const std::string& key);

}  // namespace dcpp
