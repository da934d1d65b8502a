#pragma once
// A Python object that is neither a tensor nor a plain value, as a value of a state dict: what
// Python checkpoints hold besides tensors and plain data (Megatron-LM's `args` Namespace with its
// dtypes and enums, numpy arrays and scalars, sets, bytes, ...), read as inert data and written
// back so that Python reads the same values. Typed accessors for the well-known ones:
// <dcpp/format/python_values.h>.

#include <dcpp/core/export.h>

#include <ATen/core/ivalue.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace dcpp {

/// The classes dcpp decodes into attributes (PythonObject::class_name, with kDecoded):
///   "numpy.ndarray" {array: Tensor, dtype: str}: the array in C order as a tensor of the torch
///       dtype of its kind and size (numpy's `u2`, `u4`, `u8` as the signed dtype of their size:
///       the same bits), and numpy's dtype string ("<u4", "|b1", "<f8");
///   "argparse.Namespace" {<attribute>: value, ...};
///   "builtins.bytes" {data: str}: the bytes, any byte value;
///   "builtins.set" and "builtins.frozenset" {items: list}: the items in the pickle's order;
///   "builtins.int" {digits: str}: an int beyond int64's range, in decimal
///   ("-1267650600228229401496703205376"); "builtins.dict" {items: list of (key, value) tuples}: a
///   dict whose keys are not all str or
///       all int (tuple keys, mixed keys), in insertion order. A dict of str or of int keys is a
///       c10 dict.
inline constexpr const char* kNumpyArrayClass = "numpy.ndarray";
inline constexpr const char* kNamespaceClass = "argparse.Namespace";
inline constexpr const char* kBytesClass = "builtins.bytes";
inline constexpr const char* kSetClass = "builtins.set";
inline constexpr const char* kFrozenSetClass = "builtins.frozenset";
inline constexpr const char* kBigIntClass = "builtins.int";
inline constexpr const char* kDictClass = "builtins.dict";

/// How a Python object came to be, as its pickle says. Every object of a class dcpp does not
/// decode is kept as its pickle describes it, never imported nor called: a global, or a call of a
/// global with its arguments and the state Python would then set on the result (pickle's BUILD).
enum class PythonConstruction : uint8_t {
  kDecoded,  // one of the decoded classes above: `attributes` hold it
  kGlobal,   // a bare global: a class, a function, or a constant such as torch.bfloat16
  kReduce,   // module.name(*arguments), then `state` (REDUCE): enum members, torch.Size, ...
  kNewObj,   // module.name.__new__(module.name, *arguments), then `state` (NEWOBJ): plain objects
};

/// A Python object (docs/megatron.md, "Values"). In a state dict it is a c10::IValue holding a
/// capsule (python_object_value, python_call_value, python_object_of).
struct DCPP_API PythonObject : torch::CustomClassHolder {
  /// A decoded object (kDecoded) of `class_name` with `attributes`.
  PythonObject(std::string class_name, std::vector<std::pair<std::string, c10::IValue>> attributes)
      : class_name(std::move(class_name)), attributes(std::move(attributes)) {}
  /// A global or a call of one (kGlobal, kReduce, kNewObj).
  PythonObject(PythonConstruction construction, std::string module, std::string name,
               std::vector<c10::IValue> arguments, std::optional<c10::IValue> state);

  /// The attribute `name`, or null when the object has none of that name.
  const c10::IValue* find(const std::string& name) const;

  /// "module.Name": the decoded class, or the global (a called one's class or function).
  std::string class_name;
  /// A decoded object's attributes in their order; empty for the other constructions.
  std::vector<std::pair<std::string, c10::IValue>> attributes;

  PythonConstruction construction = PythonConstruction::kDecoded;
  /// The global as the pickle names it (kGlobal, kReduce, kNewObj): "megatron.core.enums",
  /// "ModelType". Kept apart because a name may hold dots (a nested class).
  std::string module;
  std::string name;
  /// What the global is called with (kReduce, kNewObj).
  std::vector<c10::IValue> arguments;
  /// The state set on the result (pickle's BUILD: a dict of attributes, or what the class's
  /// __setstate__ takes); nullopt when the pickle sets none.
  std::optional<c10::IValue> state;
  /// The items the pickle appends to (a list subclass) or sets on (a dict subclass such as
  /// collections.defaultdict) the result, before its state.
  std::vector<c10::IValue> list_items;
  std::vector<std::pair<c10::IValue, c10::IValue>> dict_items;
};

/// A value holding a decoded PythonObject of `class_name` with `attributes`.
DCPP_API c10::IValue python_object_value(
    std::string class_name, std::vector<std::pair<std::string, c10::IValue>> attributes);

/// A value holding the global `module.name` (construction kGlobal): `torch.bfloat16`.
DCPP_API c10::IValue python_global_value(std::string module, std::string name);

/// A value holding a call of the global `module.name` (kReduce or kNewObj) with `arguments` and
/// the `state` set on its result.
DCPP_API c10::IValue python_call_value(PythonConstruction construction, std::string module,
                                       std::string name, std::vector<c10::IValue> arguments,
                                       std::optional<c10::IValue> state = std::nullopt);

/// The PythonObject `value` holds (alive as long as `value`), or null when it holds none.
DCPP_API const PythonObject* python_object_of(const c10::IValue& value);

/// A "numpy.ndarray" value of `array` (its bits; C order) and numpy `dtype` ("<f4").
DCPP_API c10::IValue numpy_array_value(const at::Tensor& array, const std::string& dtype);

/// True when `a` and `b` are the same value exactly: tensors (also inside values) of one dtype and
/// shape with the same bytes, floats with the same bits (NaN and infinities told apart, -0.0 from
/// 0.0), dicts with the same entries in the same order, Python objects of one construction, class,
/// arguments, state and attributes. Values nested deeper than 1000 levels compare unequal.
DCPP_API bool identical_values(const c10::IValue& a, const c10::IValue& b);

}  // namespace dcpp
