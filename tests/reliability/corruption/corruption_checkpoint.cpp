#include "corruption_checkpoint.h"

#include <dcpp/state_dict/flatten.h>

#include <ATen/ATen.h>

#include <cstring>
#include <sstream>

namespace dcpp::corruption {

namespace {

// Deterministic contents: the same on every rank and in every run.
at::Tensor pattern(std::vector<int64_t> shape, at::ScalarType dtype, double scale) {
  int64_t numel = 1;
  for (int64_t size : shape) numel *= size;
  const at::Tensor flat = (at::arange(numel, at::kDouble) * scale).sin() * 100.0;
  return flat.reshape(shape).to(dtype);
}

at::Tensor maybe_filled(const at::Tensor& full, bool filled) {
  return filled ? full : at::zeros_like(full);
}

c10::IValue maybe(c10::IValue value, c10::IValue placeholder, bool filled) {
  return filled ? std::move(value) : std::move(placeholder);
}

StateDict adam_slots(const at::Tensor& param, int rank, int ranks, int64_t dim, bool filled) {
  StateDict slots;
  slots.insert("step", maybe_filled(at::scalar_tensor(42.0, at::kFloat), filled));
  slots.insert("exp_avg",
               ShardedTensor::from_chunk_of(maybe_filled(param * 0.1, filled), dim, rank, ranks));
  slots.insert("exp_avg_sq", ShardedTensor::from_chunk_of(
                                 maybe_filled(param * param * 0.01, filled), dim, rank, ranks));
  return slots;
}

}  // namespace

StateDict make_rank_state(int rank, int ranks, bool filled) {
  const at::Tensor embed = pattern({30, 64}, at::kFloat, 0.01);
  const at::Tensor layer = pattern({48, 41}, at::kFloat, 0.02);
  // 300 KiB per rank: read through the reader's ranged source, not from memory.
  const at::Tensor big = pattern({ranks * 300, 256}, at::kFloat, 0.003);

  StateDict model;
  model.insert("embed.weight",
               ShardedTensor::from_chunk_of(maybe_filled(embed, filled), 0, rank, ranks));
  model.insert("layer.weight",
               ShardedTensor::from_chunk_of(maybe_filled(layer, filled), 1, rank, ranks));
  model.insert("layer.bias", maybe_filled(pattern({41}, at::kFloat, 0.3), filled));
  model.insert("big", ShardedTensor::from_chunk_of(maybe_filled(big, filled), 0, rank, ranks));
  model.insert("norm.scale", maybe_filled(at::scalar_tensor(0.5, at::kDouble), filled));
  model.insert("empty", at::empty({0, 3}, at::kFloat));
  model.insert("half", maybe_filled(pattern({8, 8}, at::kBFloat16, 0.7), filled));
  model.insert("ids", maybe_filled(at::arange(16, at::kLong) * 7919, filled));

  StateDict state;
  state.insert("model", std::move(model));

  StateDict per_param;
  per_param.insert("model.embed.weight", adam_slots(embed, rank, ranks, 0, filled));
  per_param.insert("model.layer.weight", adam_slots(layer, rank, ranks, 1, filled));
  StateDict group;
  group.insert("lr", maybe(0.001, 0.0, filled));
  group.insert("betas", maybe(c10::ivalue::Tuple::create({0.9, 0.999}),
                              c10::ivalue::Tuple::create({0.0, 0.0}), filled));
  group.insert("weight_decay", maybe(0.01, 0.0, filled));
  group.insert("amsgrad", maybe(false, true, filled));
  group.insert("params", maybe(std::vector<std::string>{"model.embed.weight", "model.layer.weight"},
                               std::vector<std::string>{}, filled));
  StateList groups;
  groups.push_back(std::move(group));
  StateDict optim;
  optim.insert("state", std::move(per_param));
  optim.insert("param_groups", std::move(groups));
  state.insert("optim", std::move(optim));

  state.insert("step", maybe(int64_t{1234}, int64_t{0}, filled));
  state.insert("run_name", maybe(std::string("corruption-harness"), std::string(), filled));
  state.insert("loss", maybe(0.125, 0.0, filled));
  state.insert("note", c10::IValue());
  // A tuple is one value, saved as bytes; the tensor inside it gets a storage record of its own.
  state.insert("rng",
               maybe(c10::ivalue::Tuple::create({int64_t{5}, at::arange(32, at::kByte) * 3}),
                     c10::ivalue::Tuple::create({int64_t{0}, at::zeros({1}, at::kByte)}), filled));
  return state;
}

namespace {

bool same_tensor(const at::Tensor& a, const at::Tensor& b) {
  if (a.scalar_type() != b.scalar_type() || a.sizes() != b.sizes()) return false;
  if (a.numel() == 0) return true;
  const at::Tensor ca = a.contiguous();
  const at::Tensor cb = b.contiguous();
  return std::memcmp(ca.data_ptr(), cb.data_ptr(), ca.numel() * ca.element_size()) == 0;
}

bool same_value(const c10::IValue& a, const c10::IValue& b) {
  if (a.isTuple() && b.isTuple()) {
    const auto& x = a.toTupleRef().elements();
    const auto& y = b.toTupleRef().elements();
    if (x.size() != y.size()) return false;
    for (std::size_t i = 0; i < x.size(); ++i) {
      if (!same_value(x[i], y[i])) return false;
    }
    return true;
  }
  if (a.isTensor() && b.isTensor()) return same_tensor(a.toTensor(), b.toTensor());
  std::ostringstream sa;
  std::ostringstream sb;
  sa << a.tagKind() << ":" << a;
  sb << b.tagKind() << ":" << b;
  return sa.str() == sb.str();
}

bool same_leaf(const StateValue& a, const StateValue& b) {
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case StateValue::Kind::kTensor:
      return same_tensor(a.tensor(), b.tensor());
    case StateValue::Kind::kShardedTensor: {
      const auto& x = a.sharded_tensor().local_shards();
      const auto& y = b.sharded_tensor().local_shards();
      if (x.size() != y.size()) return false;
      for (std::size_t i = 0; i < x.size(); ++i) {
        if (x[i].offsets != y[i].offsets || !same_tensor(x[i].tensor, y[i].tensor)) return false;
      }
      return true;
    }
    case StateValue::Kind::kValue:
      return same_value(a.value(), b.value());
    case StateValue::Kind::kList: {
      if (a.list().size() != b.list().size()) return false;
      for (std::size_t i = 0; i < a.list().size(); ++i) {
        if (!same_leaf(a.list()[i], b.list()[i])) return false;
      }
      return true;
    }
    default:
      return false;
  }
}

}  // namespace

bool same_state(const StateDict& loaded, const StateDict& expected, std::string& where) {
  StateDict a = loaded;
  StateDict b = expected;
  const std::vector<FlatEntry> x = flatten_state_dict(a);
  const std::vector<FlatEntry> y = flatten_state_dict(b);
  if (x.size() != y.size()) {
    where = std::to_string(x.size()) + " keys loaded, " + std::to_string(y.size()) + " saved";
    return false;
  }
  for (std::size_t i = 0; i < x.size(); ++i) {
    if (x[i].key != y[i].key || !same_leaf(*x[i].value, *y[i].value)) {
      where = y[i].key;
      return false;
    }
  }
  return true;
}

}  // namespace dcpp::corruption
