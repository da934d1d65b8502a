#include <dcpp/state_dict/optimizer_state_codec.h>

#include "builtin_optimizer_codecs.h"

#include <dcpp/core/checkpoint_error.h>

#include <ATen/ATen.h>

#include <cmath>
#include <mutex>
#include <unordered_map>

namespace dcpp {

namespace {

struct Registry {
  std::mutex mutex;
  std::unordered_map<std::type_index, std::shared_ptr<const OptimizerStateCodec>> codecs;
};

Registry& registry() {
  static Registry instance;
  return instance;
}

}  // namespace

void register_optimizer_state_codec(std::type_index optimizer_type,
                                    std::shared_ptr<const OptimizerStateCodec> codec) {
  if (!codec) {
    throw CheckpointError(ErrorKind::kUsage,
                          "register_optimizer_state_codec: the codec must not be null");
  }
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.codecs[optimizer_type] = std::move(codec);
}

std::shared_ptr<const OptimizerStateCodec> find_optimizer_state_codec(
    const torch::optim::Optimizer& optimizer) {
  {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    auto found = r.codecs.find(std::type_index(typeid(optimizer)));
    if (found != r.codecs.end()) {
      return found->second;
    }
  }
  if (auto codec = detail::builtin_optimizer_state_codec(optimizer)) {
    return codec;
  }
  throw CheckpointError(
      ErrorKind::kUsage,
      std::string("no optimizer state codec for optimizer type '") + typeid(optimizer).name() +
          "': register one with dcpp::register_optimizer_state_codec<YourOptimizer>() "
          "(see docs/state_dict.md)");
}

double state_number(const StateValue& value, const std::string& key) {
  if (value.is_value()) {
    const c10::IValue& v = value.value();
    if (v.isDouble()) {
      return v.toDouble();
    }
    if (v.isInt()) {
      return static_cast<double>(v.toInt());
    }
    if (v.isBool()) {
      return v.toBool() ? 1.0 : 0.0;
    }
  } else if (value.is_tensor() && value.tensor().numel() == 1) {
    return value.tensor().item<double>();
  }
  throw CheckpointError(
      ErrorKind::kIncompatible,
      "optimizer state '" + key + "' is a " + value.kind_name() +
          (value.is_value() ? " (" + value.value().tagKind() + ")" : std::string()) +
          ", not a number");
}

int64_t state_int(const StateValue& value, const std::string& key) {
  return static_cast<int64_t>(std::llround(state_number(value, key)));
}

bool state_bool(const StateValue& value, const std::string& key) {
  return state_number(value, key) != 0.0;
}

at::Tensor state_tensor(const StateValue& value, const std::string& key) {
  if (value.is_tensor()) {
    return value.tensor();
  }
  if (value.is_value() && (value.value().isDouble() || value.value().isInt())) {
    return at::scalar_tensor(state_number(value, key), at::kDouble);
  }
  throw CheckpointError(ErrorKind::kIncompatible, "optimizer state '" + key + "' is a " +
                                                      value.kind_name() + ", not a tensor");
}

const StateValue& required(const StateDict& state, const std::string& key) {
  const StateValue* value = state.find(key);
  if (value == nullptr) {
    throw CheckpointError(ErrorKind::kIncompatible, "optimizer state has no '" + key + "'");
  }
  return *value;
}

}  // namespace dcpp
