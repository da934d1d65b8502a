#include <dcpp/format/python_values.h>

#include "format/pickle/python_int.h"
#include "format/pickle/python_objects.h"
#include "format/pickle/torch_pickle.h"

#include <dcpp/core/checkpoint_error.h>

#include <ATen/ATen.h>
#include <ATen/core/Dict.h>
#include <ATen/core/List.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace dcpp {

namespace {

// The object `value` holds when it was made as `construction`, else null.
const PythonObject* made_as(const c10::IValue& value, PythonConstruction construction) {
  const PythonObject* object = python_object_of(value);
  return object != nullptr && object->construction == construction ? object : nullptr;
}

const PythonObject* decoded(const c10::IValue& value, const char* class_name) {
  const PythonObject* object = made_as(value, PythonConstruction::kDecoded);
  return object != nullptr && object->class_name == class_name ? object : nullptr;
}

// numpy.core.multiarray.scalar(dtype, bytes): numpy 1 and 2 (numpy._core) spell it alike.
std::optional<NumpyArray> numpy_scalar_of(const PythonObject& object) {
  const bool scalar = object.name == "scalar" && (object.module == "numpy.core.multiarray" ||
                                                  object.module == "numpy._core.multiarray");
  if (!scalar || object.state || object.arguments.size() != 2) return std::nullopt;
  const PythonObject* dtype = made_as(object.arguments[0], PythonConstruction::kReduce);
  const std::optional<std::string> data = python_bytes_of(object.arguments[1]);
  if (dtype == nullptr || dtype->module != "numpy" || dtype->name != "dtype" || !data ||
      dtype->arguments.empty() || !dtype->arguments[0].isString() || !dtype->state ||
      !dtype->state->isTuple() || dtype->state->toTupleRef().elements().size() < 2 ||
      !dtype->state->toTupleRef().elements()[1].isString()) {
    return std::nullopt;
  }
  const std::string& code = dtype->arguments[0].toStringRef();
  const std::string& order = dtype->state->toTupleRef().elements()[1].toStringRef();
  const std::optional<at::ScalarType> torch_dtype = detail::torch_dtype_of_numpy(code);
  if (!torch_dtype) return std::nullopt;
  const std::size_t item = c10::elementSize(*torch_dtype);
  if ((order == ">" && item > 1) || data->size() != item) return std::nullopt;
  at::Tensor array = at::empty({}, at::TensorOptions().dtype(*torch_dtype));
  std::memcpy(array.data_ptr(), data->data(), item);
  return NumpyArray{array, (item == 1 ? "|" : "<") + code};
}

}  // namespace

std::optional<at::ScalarType> torch_dtype_of(const c10::IValue& value) {
  const PythonObject* object = made_as(value, PythonConstruction::kGlobal);
  if (object == nullptr || object->module != "torch") return std::nullopt;
  return detail::find_dtype_by_python_name(object->name);
}

c10::IValue torch_dtype_value(at::ScalarType dtype) {
  return python_global_value("torch", detail::python_dtype_name(dtype));
}

std::optional<std::vector<int64_t>> torch_size_of(const c10::IValue& value) {
  const PythonObject* object = made_as(value, PythonConstruction::kReduce);
  if (object == nullptr || object->module != "torch" || object->name != "Size" || object->state ||
      object->arguments.size() != 1) {
    return std::nullopt;
  }
  const c10::IValue& sizes = object->arguments[0];
  const c10::ArrayRef<c10::IValue> elements = sizes.isTuple()  ? sizes.toTupleRef().elements()
                                              : sizes.isList() ? sizes.toListRef()
                                                               : c10::ArrayRef<c10::IValue>();
  if (!sizes.isTuple() && !sizes.isList()) return std::nullopt;
  std::vector<int64_t> result;
  for (const c10::IValue& size : elements) {
    if (!size.isInt()) return std::nullopt;
    result.push_back(size.toInt());
  }
  return result;
}

std::optional<NumpyArray> numpy_array_of(const c10::IValue& value) {
  if (const PythonObject* array = decoded(value, kNumpyArrayClass)) {
    const c10::IValue* tensor = array->find("array");
    const c10::IValue* dtype = array->find("dtype");
    if (tensor == nullptr || dtype == nullptr || !tensor->isTensor() || !dtype->isString()) {
      return std::nullopt;
    }
    return NumpyArray{tensor->toTensor(), dtype->toStringRef()};
  }
  if (const PythonObject* call = made_as(value, PythonConstruction::kReduce)) {
    return numpy_scalar_of(*call);
  }
  return std::nullopt;
}

std::optional<c10::IValue> python_enum_value_of(const c10::IValue& value) {
  const PythonObject* object = made_as(value, PythonConstruction::kReduce);
  if (object == nullptr || object->state || object->arguments.size() != 1) return std::nullopt;
  return object->arguments[0];
}

std::optional<std::vector<std::pair<std::string, c10::IValue>>> python_attributes_of(
    const c10::IValue& value) {
  const PythonObject* object = python_object_of(value);
  if (object == nullptr) return std::nullopt;
  if (object->construction == PythonConstruction::kDecoded) {
    if (object->class_name != kNamespaceClass) return std::nullopt;
    return object->attributes;
  }
  if (!object->state || !object->state->isGenericDict()) return std::nullopt;
  const c10::impl::GenericDict state = object->state->toGenericDict();
  if (state.size() > 0 && state.keyType()->kind() != c10::TypeKind::StringType) {
    return std::nullopt;
  }
  std::vector<std::pair<std::string, c10::IValue>> attributes;
  for (const auto& entry : state) attributes.emplace_back(entry.key().toStringRef(), entry.value());
  return attributes;
}

std::optional<std::string> python_bytes_of(const c10::IValue& value) {
  const PythonObject* object = decoded(value, kBytesClass);
  const c10::IValue* data = object == nullptr ? nullptr : object->find("data");
  if (data == nullptr || !data->isString()) return std::nullopt;
  return data->toStringRef();
}

c10::IValue python_bytes_value(std::string bytes) {
  return python_object_value(kBytesClass, {{"data", std::move(bytes)}});
}

std::optional<std::vector<c10::IValue>> python_set_items(const c10::IValue& value) {
  const PythonObject* object = decoded(value, kSetClass);
  if (object == nullptr) object = decoded(value, kFrozenSetClass);
  const c10::IValue* items = object == nullptr ? nullptr : object->find("items");
  if (items == nullptr || !items->isList()) return std::nullopt;
  return items->toListRef().vec();
}

c10::IValue python_set_value(std::vector<c10::IValue> items, bool frozen) {
  c10::impl::GenericList list(c10::AnyType::get());
  list.reserve(items.size());
  for (c10::IValue& item : items) list.push_back(std::move(item));
  return python_object_value(frozen ? kFrozenSetClass : kSetClass, {{"items", std::move(list)}});
}

std::optional<std::string> python_int_digits(const c10::IValue& value) {
  if (value.isInt()) return std::to_string(value.toInt());
  const PythonObject* object = decoded(value, kBigIntClass);
  const c10::IValue* digits = object == nullptr ? nullptr : object->find("digits");
  if (digits == nullptr || !digits->isString()) return std::nullopt;
  return digits->toStringRef();
}

c10::IValue python_int_value(const std::string& digits) {
  // Validates, bounds and normalizes ("-007" -> "-7") in one round.
  return detail::int_value_of_normal_digits(
      detail::decimal_from_twos_complement(detail::twos_complement_from_decimal(digits)));
}

namespace detail {

c10::IValue int_value_of_normal_digits(const std::string& normal) {
  errno = 0;
  char* end = nullptr;
  const long long small = std::strtoll(normal.c_str(), &end, 10);
  if (errno == 0 && end != nullptr && *end == '\0') return c10::IValue(static_cast<int64_t>(small));
  return python_object_value(kBigIntClass, {{"digits", normal}});
}

}  // namespace detail

std::optional<std::vector<std::pair<c10::IValue, c10::IValue>>> python_dict_items(
    const c10::IValue& value) {
  std::vector<std::pair<c10::IValue, c10::IValue>> items;
  if (value.isGenericDict()) {
    for (const auto& entry : value.toGenericDict()) items.emplace_back(entry.key(), entry.value());
    return items;
  }
  const PythonObject* object = decoded(value, kDictClass);
  const c10::IValue* pairs = object == nullptr ? nullptr : object->find("items");
  if (pairs == nullptr || !pairs->isList()) return std::nullopt;
  for (const c10::IValue& pair : pairs->toListRef()) {
    if (!pair.isTuple() || pair.toTupleRef().elements().size() != 2) return std::nullopt;
    items.emplace_back(pair.toTupleRef().elements()[0], pair.toTupleRef().elements()[1]);
  }
  return items;
}

c10::IValue python_dict_value(std::vector<std::pair<c10::IValue, c10::IValue>> items) {
  const auto all_keys = [&](bool (c10::IValue::*is)() const) {
    for (const auto& item : items) {
      if (!(item.first.*is)()) return false;
    }
    return true;
  };
  const bool int_keys = !items.empty() && all_keys(&c10::IValue::isInt);
  if (int_keys || all_keys(&c10::IValue::isString)) {
    c10::impl::GenericDict dict(
        int_keys ? c10::TypePtr(c10::IntType::get()) : c10::TypePtr(c10::StringType::get()),
        c10::AnyType::get());
    dict.reserve(items.size());
    for (auto& [key, value] : items) dict.insert_or_assign(std::move(key), std::move(value));
    return dict;
  }
  c10::impl::GenericList pairs(c10::AnyType::get());
  pairs.reserve(items.size());
  for (auto& [key, value] : items) {
    pairs.push_back(c10::ivalue::Tuple::create({std::move(key), std::move(value)}));
  }
  return python_object_value(kDictClass, {{"items", std::move(pairs)}});
}

}  // namespace dcpp
