#pragma once
// `data.pkl`, the pickle inside every `torch.save` archive: for a tensor item it rebuilds one
// tensor over storage record "data/0"; for a bytes item it is the pickled value itself.
//
// Encoding matches Python's `torch.save` (pickle protocol 2) byte for byte where the value allows.
// Decoding runs dcpp's restricted unpickler: only the globals `torch.save` emits for tensors and
// plain values are accepted, nothing is ever called, and anything else is a CheckpointError that
// names the global and `what`.

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dcpp::detail {

/// A tensor as `data.pkl` describes it: a view over storage record `data/<storage_key>`.
struct TensorRef {
  std::string storage_key;  // "0"
  at::ScalarType dtype = at::kFloat;
  int64_t storage_numel = 0;  // elements in the storage record
  int64_t storage_offset = 0;
  std::vector<int64_t> sizes;
  std::vector<int64_t> strides;
  bool requires_grad = false;
};

/// `torch.save(tensor)`'s data.pkl: `_rebuild_tensor_v2(persistent storage, offset, size, stride,
/// requires_grad, OrderedDict())`. Throws CheckpointError for a dtype Python cannot name.
std::string encode_tensor_pickle(const TensorRef& tensor);

/// `torch.save(value)`'s data.pkl for a non-tensor value: None, bool, int, float, complex, str,
/// tuple, list (generic or typed), dict (str or int keys) and Python objects (python_object.h) of
/// those, and tensors, which are given storage keys "0", "1", ... in the order met and appended to
/// `tensors` for the caller to store as `data/<key>` records. Each tensor is described as a
/// contiguous storage of exactly its elements (offset 0, contiguous strides, requires_grad kept,
/// location 'cpu'): its record must hold the elements in row-major order. Byte-identical to
/// Python's for the same value, except that Python shares memo entries between equal objects it
/// happens to share (equal strings are not shared here). Throws CheckpointError for any other
/// IValue (futures, devices, ...).
std::string encode_value_pickle(const c10::IValue& value, std::vector<at::Tensor>& tensors);

/// Decodes a tensor item's data.pkl. Throws CheckpointError naming `what` when it is not exactly
/// one rebuilt tensor, or its dtype, sizes or strides are invalid.
TensorRef decode_tensor_pickle(std::string_view pickle, std::string_view what);

/// Decodes a bytes item's data.pkl into an IValue: None, bool, int, float, complex, str, tuple (as
/// a Tuple), list (as a generic list), dict (str or int keys; as a generic dict, order kept),
/// tensors (each built by `load_tensor`), and every other Python value as a PythonObject: bytes,
/// sets, big ints, dicts of other keys, numpy arrays and Namespaces decoded; any other global or
/// call of one (dtypes, enums, torch.Size, numpy scalars, user classes) kept as its pickle
/// describes it, never imported or called. Throws CheckpointError naming `what`: kCorrupt for
/// malformed bytes or a global that runs code (runs_code_when_unpickled); kIncompatible for a
/// storage outside a tensor dcpp rebuilds (a quantized or sparse tensor).
c10::IValue decode_value_pickle(std::string_view pickle,
                                const std::function<at::Tensor(const TensorRef&)>& load_tensor,
                                std::string_view what);

/// The name of `dtype` in Python's `torch` module ("float32", "bfloat16"), as `.metadata` and
/// `_rebuild_tensor_v3` name dtypes (bare globals `torch.<name>`). Throws CheckpointError for a
/// dtype Python cannot name (quantized types).
std::string python_dtype_name(at::ScalarType dtype);
/// The dtype `torch.<name>`. Throws CheckpointError naming `torch.<name>` and `what` when it is no
/// dtype, or one this libtorch lacks (e.g. float8 types on libtorch 1.13).
at::ScalarType dtype_from_python_name(std::string_view name, std::string_view what);
/// The dtype `torch.<name>` when this libtorch has it, else nullopt.
std::optional<at::ScalarType> find_dtype_by_python_name(std::string_view name);
/// True when `torch.<name>` is a dtype of PyTorch 2.x, supported here or not (for allowlists, so
/// that an unsupported dtype is reported as such rather than as a foreign global).
bool is_python_dtype_name(std::string_view name);

/// The Python storage class name for a dtype ("FloatStorage"), or throws CheckpointError.
std::string storage_class_name(at::ScalarType dtype);
/// The dtype of a storage class name, or throws CheckpointError naming it.
at::ScalarType dtype_from_storage_class(std::string_view name);

/// The strides of a contiguous tensor of `sizes`, as torch.save writes them (a size-0 dimension
/// counts as 1, as in PyTorch).
std::vector<int64_t> row_major_strides(at::IntArrayRef sizes);

}  // namespace dcpp::detail
