#pragma once
// A value saved whole, as one item: what Python's DCP does with an `io.BytesIO` and Megatron-Core
// with a ShardedObject's data, whatever it holds.

#include <dcpp/core/export.h>
#include <dcpp/state_dict/state_dict.h>

#include <ATen/core/ivalue.h>

namespace dcpp {

/// A value that a save writes as one bytes item (`torch.save(value)`, its tensors inside the
/// item), never flattened: a list or dict in a state dict is otherwise split into items of its own
/// wherever it holds a tensor or a dict (flatten.h). In a state dict it is a c10::IValue holding a
/// capsule (whole_value, whole_value_of), a leaf. Loading into a whole value replaces it with the
/// loaded value, whole again.
struct DCPP_API WholeValue : torch::CustomClassHolder {
  explicit WholeValue(c10::IValue value) : value(std::move(value)) {}

  c10::IValue value;
};

/// A value holding `value`, to be saved whole. A value that already is one is returned as it is.
DCPP_API c10::IValue whole_value(c10::IValue value);

/// `state` as one value saved whole: its dicts as Python dicts (in insertion order), its lists as
/// lists, its tensors inside. Throws CheckpointError (kUsage) naming the key of a ShardedTensor or
/// a Stateful in it, which a value cannot hold.
DCPP_API c10::IValue whole_value(const StateDict& state);

/// The value `value` holds whole (alive as long as `value`), or null when it is not a whole value.
DCPP_API const c10::IValue* whole_value_of(const c10::IValue& value);

}  // namespace dcpp
