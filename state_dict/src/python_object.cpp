#include <dcpp/state_dict/python_object.h>

#include <dcpp/state_dict/whole_value.h>

#include <ATen/core/Dict.h>
#include <ATen/core/List.h>

#include <cstring>

namespace dcpp {

PythonObject::PythonObject(PythonConstruction construction, std::string module, std::string name,
                           std::vector<c10::IValue> arguments, std::optional<c10::IValue> state)
    : class_name(module + "." + name),
      construction(construction),
      module(std::move(module)),
      name(std::move(name)),
      arguments(std::move(arguments)),
      state(std::move(state)) {}

const c10::IValue* PythonObject::find(const std::string& name) const {
  for (const auto& [attribute, value] : attributes) {
    if (attribute == name) return &value;
  }
  return nullptr;
}

c10::IValue python_object_value(std::string class_name,
                                std::vector<std::pair<std::string, c10::IValue>> attributes) {
  return c10::IValue::make_capsule(
      c10::make_intrusive<PythonObject>(std::move(class_name), std::move(attributes)));
}

c10::IValue python_global_value(std::string module, std::string name) {
  return c10::IValue::make_capsule(
      c10::make_intrusive<PythonObject>(PythonConstruction::kGlobal, std::move(module),
                                        std::move(name), std::vector<c10::IValue>{}, std::nullopt));
}

c10::IValue python_call_value(PythonConstruction construction, std::string module, std::string name,
                              std::vector<c10::IValue> arguments,
                              std::optional<c10::IValue> state) {
  return c10::IValue::make_capsule(c10::make_intrusive<PythonObject>(
      construction, std::move(module), std::move(name), std::move(arguments), std::move(state)));
}

const PythonObject* python_object_of(const c10::IValue& value) {
  if (!value.isCapsule()) return nullptr;
  return dynamic_cast<const PythonObject*>(value.toCapsule().get());
}

c10::IValue numpy_array_value(const at::Tensor& array, const std::string& dtype) {
  return python_object_value(kNumpyArrayClass, {{"array", array}, {"dtype", dtype}});
}

namespace {

constexpr int kMaxDepth = 1000;

bool identical(const c10::IValue& a, const c10::IValue& b, int depth);

bool identical_elements(c10::ArrayRef<c10::IValue> a, c10::ArrayRef<c10::IValue> b, int depth) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (!identical(a[i], b[i], depth + 1)) return false;
  }
  return true;
}

bool identical_tensors(const at::Tensor& a, const at::Tensor& b) {
  if (a.defined() != b.defined()) return false;
  if (!a.defined()) return true;
  if (a.scalar_type() != b.scalar_type() || a.sizes() != b.sizes()) return false;
  if (a.numel() == 0) return true;  // memcmp must not see an empty tensor's null data pointer
  const at::Tensor x = a.contiguous().cpu();
  const at::Tensor y = b.contiguous().cpu();
  return std::memcmp(x.data_ptr(), y.data_ptr(), x.numel() * x.element_size()) == 0;
}

bool identical_objects(const PythonObject& x, const PythonObject& y, int depth) {
  if (x.construction != y.construction || x.class_name != y.class_name || x.module != y.module ||
      x.name != y.name || x.attributes.size() != y.attributes.size() ||
      x.state.has_value() != y.state.has_value() ||
      !identical_elements(x.arguments, y.arguments, depth)) {
    return false;
  }
  if (x.state && !identical(*x.state, *y.state, depth + 1)) return false;
  if (!identical_elements(x.list_items, y.list_items, depth) ||
      x.dict_items.size() != y.dict_items.size()) {
    return false;
  }
  for (std::size_t i = 0; i < x.dict_items.size(); ++i) {
    if (!identical(x.dict_items[i].first, y.dict_items[i].first, depth + 1) ||
        !identical(x.dict_items[i].second, y.dict_items[i].second, depth + 1)) {
      return false;
    }
  }
  for (std::size_t i = 0; i < x.attributes.size(); ++i) {
    if (x.attributes[i].first != y.attributes[i].first ||
        !identical(x.attributes[i].second, y.attributes[i].second, depth + 1)) {
      return false;
    }
  }
  return true;
}

bool identical(const c10::IValue& a, const c10::IValue& b, int depth) {
  if (depth > kMaxDepth) return false;
  if (const c10::IValue* whole = whole_value_of(a)) return identical(*whole, b, depth + 1);
  if (const c10::IValue* whole = whole_value_of(b)) return identical(a, *whole, depth + 1);
  if (a.tagKind() != b.tagKind()) return false;
  if (a.isTensor()) return identical_tensors(a.toTensor(), b.toTensor());
  if (a.isDouble()) {
    const double x = a.toDouble();
    const double y = b.toDouble();
    return std::memcmp(&x, &y, sizeof x) == 0;
  }
  if (a.isComplexDouble()) {
    const c10::complex<double> x = a.toComplexDouble();
    const c10::complex<double> y = b.toComplexDouble();
    return std::memcmp(&x, &y, sizeof x) == 0;
  }
  if (a.isCapsule()) {
    const PythonObject* x = python_object_of(a);
    const PythonObject* y = python_object_of(b);
    if (x == nullptr || y == nullptr) return x == y && a.isSameIdentity(b);
    return identical_objects(*x, *y, depth);
  }
  if (a.isTuple()) {
    return identical_elements(a.toTupleRef().elements(), b.toTupleRef().elements(), depth);
  }
  if (a.isList()) return identical_elements(a.toListRef(), b.toListRef(), depth);
  if (a.isGenericDict()) {
    const c10::impl::GenericDict x = a.toGenericDict();
    const c10::impl::GenericDict y = b.toGenericDict();
    if (x.size() != y.size()) return false;
    for (auto i = x.begin(), j = y.begin(); i != x.end(); ++i, ++j) {
      if (!identical(i->key(), j->key(), depth + 1) ||
          !identical(i->value(), j->value(), depth + 1)) {
        return false;
      }
    }
    return true;
  }
  if (a.isNone() || a.isBool() || a.isInt() || a.isString()) return a == b;
  return a.isSameIdentity(b);
}

}  // namespace

bool identical_values(const c10::IValue& a, const c10::IValue& b) { return identical(a, b, 0); }

}  // namespace dcpp
