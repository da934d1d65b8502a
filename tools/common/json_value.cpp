#include "common/json_value.h"

#include <dcpp/core/checkpoint_error.h>
#include <dcpp/format/metadata.h>
#include <dcpp/state_dict/python_object.h>

#include <ATen/core/Dict.h>
#include <ATen/core/List.h>
#include <ATen/core/jit_type.h>

#include <cmath>
#include <limits>
#include <sstream>

namespace dcpp::tools {

namespace {

std::string describe_tensor(const at::Tensor& tensor) {
  std::ostringstream out;
  out << "<tensor " << dtype_name(tensor.scalar_type()) << " " << tensor.sizes() << ">";
  return out.str();
}

}  // namespace

nlohmann::json to_json(const c10::IValue& value) {
  if (value.isNone()) return nullptr;
  if (value.isBool()) return value.toBool();
  if (value.isInt()) return value.toInt();
  if (value.isDouble()) {
    const double d = value.toDouble();
    return std::isfinite(d) ? nlohmann::json(d) : nlohmann::json(nullptr);
  }
  if (value.isString()) return value.toStringRef();
  if (value.isTensor()) return describe_tensor(value.toTensor());
  if (value.isTuple()) {
    nlohmann::json array = nlohmann::json::array();
    for (const c10::IValue& element : value.toTupleRef().elements()) {
      array.push_back(to_json(element));
    }
    return array;
  }
  if (value.isList()) {
    nlohmann::json array = nlohmann::json::array();
    for (const c10::IValue& element : value.toListRef()) {
      array.push_back(to_json(element));
    }
    return array;
  }
  if (value.isGenericDict()) {
    nlohmann::json object = nlohmann::json::object();
    for (const auto& entry : value.toGenericDict()) {
      const c10::IValue& key = entry.key();
      object[key.isString() ? key.toStringRef()
             : key.isInt()  ? std::to_string(key.toInt())
                            : key.tagKind()] = to_json(entry.value());
    }
    return object;
  }
  if (const PythonObject* object = python_object_of(value)) {
    const c10::IValue* array = object->find("array");
    const c10::IValue* dtype = object->find("dtype");
    if (object->class_name == kNumpyArrayClass && array != nullptr && array->isTensor() &&
        dtype != nullptr && dtype->isString()) {
      std::ostringstream out;
      out << "<numpy.ndarray " << dtype->toStringRef() << " " << array->toTensor().sizes() << ">";
      return out.str();
    }
    nlohmann::json attributes = {{"__class__", object->class_name}};
    for (const auto& [name, attribute] : object->attributes) attributes[name] = to_json(attribute);
    return attributes;
  }
  return "<" + value.tagKind() + ">";
}

c10::IValue from_json(const nlohmann::json& json) {
  switch (json.type()) {
    case nlohmann::json::value_t::null:
      return c10::IValue();
    case nlohmann::json::value_t::boolean:
      return json.get<bool>();
    case nlohmann::json::value_t::number_integer:
      return json.get<int64_t>();
    case nlohmann::json::value_t::number_unsigned: {
      const auto value = json.get<uint64_t>();
      if (value <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return static_cast<int64_t>(value);
      }
      return static_cast<double>(value);
    }
    case nlohmann::json::value_t::number_float:
      return json.get<double>();
    case nlohmann::json::value_t::string:
      return json.get<std::string>();
    case nlohmann::json::value_t::array: {
      c10::impl::GenericList list(c10::AnyType::get());
      for (const nlohmann::json& element : json) list.push_back(from_json(element));
      return list;
    }
    case nlohmann::json::value_t::object: {
      c10::impl::GenericDict dict(c10::StringType::get(), c10::AnyType::get());
      for (const auto& [key, element] : json.items()) dict.insert(key, from_json(element));
      return dict;
    }
    default:  // binary: never parsed from text
      throw CheckpointError(
          ErrorKind::kUsage,
          "a JSON value of type " + std::string(json.type_name()) + " has no state dict value");
  }
}

nlohmann::json to_json(const ObjectPath& path) {
  nlohmann::json array = nlohmann::json::array();
  for (const PathElement& step : path) {
    if (const auto* key = std::get_if<std::string>(&step)) {
      array.push_back(*key);
    } else {
      array.push_back(std::get<int64_t>(step));
    }
  }
  return array;
}

nlohmann::json to_json(const TensorStats& stats) {
  const auto number = [](const std::optional<double>& value) {
    return value && std::isfinite(*value) ? nlohmann::json(*value) : nlohmann::json(nullptr);
  };
  return nlohmann::json{
      {"sum", number(stats.sum)}, {"abs_sum", number(stats.abs_sum)}, {"min", number(stats.min)},
      {"max", number(stats.max)}, {"mean", number(stats.mean)},       {"nan", stats.nan},
      {"inf", stats.inf}};
}

nlohmann::json to_json(const StateValue& value) {
  switch (value.kind()) {
    case StateValue::Kind::kValue:
      return to_json(value.value());
    case StateValue::Kind::kTensor:
      return describe_tensor(value.tensor());
    case StateValue::Kind::kList: {
      nlohmann::json array = nlohmann::json::array();
      for (const StateValue& element : value.list()) {
        array.push_back(to_json(element));
      }
      return array;
    }
    case StateValue::Kind::kDict: {
      nlohmann::json object = nlohmann::json::object();
      for (const auto& item : value.dict()) {
        object[item.key] = to_json(item.value);
      }
      return object;
    }
    default:
      return std::string("<") + value.kind_name() + ">";
  }
}

}  // namespace dcpp::tools
