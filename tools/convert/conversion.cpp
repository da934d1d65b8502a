#include "convert/conversion.h"

#include "state_dict/state_value_ivalue.h"

#include <dcpp/core/checkpoint_error.h>
#include <dcpp/state_dict/whole_value.h>

#include <ATen/ATen.h>

namespace dcpp::tools {

Conversion::Conversion(CheckpointSource& source, std::optional<at::ScalarType> dtype,
                       ProgressBar& progress)
    : source_(source), dtype_(dtype), progress_(progress) {}

at::ScalarType Conversion::output_dtype(const SourceEntry& entry) const {
  // A 0-dim tensor is a scalar of state, not a parameter: Adam's `step` (float32) counts to
  // millions, which bfloat16 holds exactly only up to 256.
  const bool cast = dtype_ && at::isFloatingType(entry.dtype) && !entry.shape.empty();
  return cast ? *dtype_ : entry.dtype;
}

at::Tensor Conversion::read_tensor(const SourceEntry& entry) {
  at::Tensor tensor = source_.read_tensor(entry);
  const at::ScalarType dtype = output_dtype(entry);
  if (tensor.scalar_type() != dtype) {
    tensor = tensor.to(dtype);  // the source's tensor is dropped here
  }
  progress_.advance(entry.nbytes(), entry.key);
  return tensor.contiguous();
}

StateDict Conversion::placeholder_state_dict() {
  StateDict root;
  placeholders_.clear();
  for (const SourceEntry& entry : source_.entries()) {
    if (entry.is_tensor) {
      at::Tensor placeholder =
          at::empty(entry.shape, at::TensorOptions().dtype(output_dtype(entry)).device(at::kMeta));
      placeholders_.emplace(placeholder.unsafeGetTensorImpl(), &entry);
      set_element(root, entry.path, StateValue(placeholder));
    } else {
      // One item in the source, one item written: never split into items of its own (a
      // Megatron ShardedObject's payload holds dicts and tensors).
      set_element(root, entry.path, StateValue(whole_value(source_.read_value(entry))));
    }
  }
  return root;
}

const SourceEntry* Conversion::entry_of(const at::Tensor& placeholder) const {
  auto found = placeholders_.find(placeholder.unsafeGetTensorImpl());
  return found != placeholders_.end() ? found->second : nullptr;
}

uint64_t Conversion::total_bytes(const CheckpointSource& source) {
  uint64_t total = 0;
  for (const SourceEntry& entry : source.entries()) total += entry.nbytes();
  return total;
}

c10::IValue to_ivalue(const StateValue& value) {
  try {
    return detail::whole_state_to_ivalue(value, "");
  } catch (const CheckpointError& e) {
    throw CheckpointError(e.kind(), std::string("cannot write into a torch.save file: ") +
                                        e.what_without_backtrace());
  }
}

}  // namespace dcpp::tools
