#pragma once
// A Python object that is neither a tensor nor a plain value, as a value of a state dict: what
// Megatron-Core's payloads hold (numpy arrays, argparse.Namespace), read as data and written back.

#include <dcpp/core/export.h>

#include <ATen/core/ivalue.h>

#include <string>
#include <utility>
#include <vector>

namespace dcpp {

/// The classes of Python object dcpp reads and writes (PythonObject::class_name).
inline constexpr const char* kNumpyArrayClass = "numpy.ndarray";
inline constexpr const char* kNamespaceClass = "argparse.Namespace";

/// A Python object of a class dcpp reads as data (docs/megatron.md, "Values"): its class as
/// "module.Name" and its attributes in their order. In a state dict it is a c10::IValue holding a
/// capsule (python_object_value, python_object_of). dcpp reads and writes two classes:
///   "numpy.ndarray" {array: Tensor, dtype: str}: the array in C order as a tensor of the torch
///       dtype of its kind and size (numpy's `u2`, `u4`, `u8` as the signed dtype of their size:
///       the same bits), and numpy's dtype string ("<u4", "|b1", "<f8");
///   "argparse.Namespace" {<attribute>: value, ...}.
struct DCPP_API PythonObject : torch::CustomClassHolder {
  PythonObject(std::string class_name, std::vector<std::pair<std::string, c10::IValue>> attributes)
      : class_name(std::move(class_name)), attributes(std::move(attributes)) {}

  /// The attribute `name`, or null when the object has none of that name.
  const c10::IValue* find(const std::string& name) const;

  std::string class_name;
  std::vector<std::pair<std::string, c10::IValue>> attributes;
};

/// A value holding a PythonObject of `class_name` with `attributes`.
DCPP_API c10::IValue python_object_value(
    std::string class_name, std::vector<std::pair<std::string, c10::IValue>> attributes);

/// The PythonObject `value` holds (alive as long as `value`), or null when it holds none.
DCPP_API const PythonObject* python_object_of(const c10::IValue& value);

/// A "numpy.ndarray" value of `array` (its bits; C order) and numpy `dtype` ("<f4").
DCPP_API c10::IValue numpy_array_value(const at::Tensor& array, const std::string& dtype);

}  // namespace dcpp
