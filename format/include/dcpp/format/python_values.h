#pragma once
// Typed access to the Python values a checkpoint's pickles hold (python_object.h): the dtypes,
// sizes, numpy scalars, enums, namespaces, sets, bytes, big ints and dicts that Megatron-LM's
// common state is made of, read without knowing how their pickles spell them. Each accessor
// returns nullopt for a value of another kind; none throws.

#include <dcpp/core/export.h>
#include <dcpp/state_dict/python_object.h>

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>
#include <c10/core/ScalarType.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace dcpp {

/// The dtype of a `torch.<name>` global (torch.bfloat16); nullopt for another value, or a dtype
/// this libtorch lacks (its name stays in the PythonObject).
DCPP_API std::optional<at::ScalarType> torch_dtype_of(const c10::IValue& value);
/// The global `torch.<name>` of `dtype`, as Python pickles it. Throws CheckpointError (kUsage) for
/// a dtype Python's torch module does not name.
DCPP_API c10::IValue torch_dtype_value(at::ScalarType dtype);

/// The sizes of a `torch.Size`.
DCPP_API std::optional<std::vector<int64_t>> torch_size_of(const c10::IValue& value);

/// A numpy array or scalar: its elements in C order as a tensor of the torch dtype of numpy's kind
/// and size (0-dimensional for a scalar such as numpy.float64(1.5)), and numpy's dtype string.
struct NumpyArray {
  at::Tensor array;
  std::string dtype;  // "<f8", "|b1"
};
DCPP_API std::optional<NumpyArray> numpy_array_of(const c10::IValue& value);

/// The value of an enum member (Python pickles `Color.RED` as `Color(1)`: its class called with
/// its value): the one argument of a call of a global with no state. A class's name says whether
/// it is an enum; this accessor does not (a one-argument call of any class answers).
DCPP_API std::optional<c10::IValue> python_enum_value_of(const c10::IValue& value);

/// The attributes of an object: an argparse.Namespace's, or those of an object whose pickle sets a
/// dict of str keys as its state (types.SimpleNamespace, dataclasses, plain class instances).
DCPP_API std::optional<std::vector<std::pair<std::string, c10::IValue>>> python_attributes_of(
    const c10::IValue& value);

/// The bytes of a Python bytes.
DCPP_API std::optional<std::string> python_bytes_of(const c10::IValue& value);
DCPP_API c10::IValue python_bytes_value(std::string bytes);

/// The items of a set or frozenset, in the pickle's order.
DCPP_API std::optional<std::vector<c10::IValue>> python_set_items(const c10::IValue& value);
DCPP_API c10::IValue python_set_value(std::vector<c10::IValue> items, bool frozen = false);

/// An int of any size in decimal: an int of int64's range, or a big one ("builtins.int").
DCPP_API std::optional<std::string> python_int_digits(const c10::IValue& value);
/// An int from decimal `digits` (an optional '-', then digits): an int when it fits int64, else a
/// "builtins.int". Throws CheckpointError (kUsage) for anything else.
DCPP_API c10::IValue python_int_value(const std::string& digits);

/// The entries of any dict, in insertion order: a c10 dict (str or int keys) or a
/// "builtins.dict" (other keys: tuples of dtypes, mixed kinds).
DCPP_API std::optional<std::vector<std::pair<c10::IValue, c10::IValue>>> python_dict_items(
    const c10::IValue& value);
/// A dict of `items`: a c10 dict when the keys are all str or all int (an empty one: str keys),
/// else a "builtins.dict".
DCPP_API c10::IValue python_dict_value(std::vector<std::pair<c10::IValue, c10::IValue>> items);

}  // namespace dcpp
