#include <dcpp/state_dict/python_object.h>

namespace dcpp {

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

const PythonObject* python_object_of(const c10::IValue& value) {
  if (!value.isCapsule()) return nullptr;
  return dynamic_cast<const PythonObject*>(value.toCapsule().get());
}

c10::IValue numpy_array_value(const at::Tensor& array, const std::string& dtype) {
  return python_object_value(kNumpyArrayClass, {{"array", array}, {"dtype", dtype}});
}

}  // namespace dcpp
