#include "common/json_value.h"

#include <dcpp/core/checkpoint_error.h>
#include <dcpp/format/metadata.h>
#include <dcpp/format/python_values.h>
#include <dcpp/state_dict/python_object.h>

#include <ATen/ATen.h>
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

nlohmann::json float_json(double value) {
  if (std::isfinite(value)) return value;
  return nlohmann::json{{"__float__", std::isnan(value) ? "nan" : value > 0 ? "inf" : "-inf"}};
}

nlohmann::json array_json(c10::ArrayRef<c10::IValue> values) {
  nlohmann::json array = nlohmann::json::array();
  for (const c10::IValue& element : values) array.push_back(to_json(element));
  return array;
}

std::string hex(const std::string& bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * bytes.size());
  for (const char c : bytes) {
    out.push_back(kDigits[static_cast<unsigned char>(c) >> 4]);
    out.push_back(kDigits[static_cast<unsigned char>(c) & 0xf]);
  }
  return out;
}

nlohmann::json python_object_json(const c10::IValue& value, const PythonObject& object) {
  if (const std::optional<NumpyArray> numpy = numpy_array_of(value)) {
    if (numpy->array.dim() == 0 && object.construction != PythonConstruction::kDecoded) {
      return nlohmann::json{{"__numpy__", numpy->dtype},
                            {"value", to_json(numpy->array.to(at::kCPU).item())}};
    }
    std::ostringstream out;
    out << "<numpy.ndarray " << numpy->dtype << " " << numpy->array.sizes() << ">";
    return out.str();
  }
  if (const std::optional<std::string> bytes = python_bytes_of(value)) {
    return nlohmann::json{{"__bytes__", hex(*bytes)}};
  }
  if (const std::optional<std::vector<c10::IValue>> items = python_set_items(value)) {
    return nlohmann::json{
        {object.class_name == kSetClass ? "__set__" : "__frozenset__", array_json(*items)}};
  }
  if (object.class_name == kBigIntClass) {
    return nlohmann::json{{"__int__", python_int_digits(value).value_or("?")}};
  }
  if (object.class_name == kDictClass) {
    nlohmann::json items = nlohmann::json::array();
    for (const auto& [key, item] :
         python_dict_items(value).value_or(std::vector<std::pair<c10::IValue, c10::IValue>>{})) {
      items.push_back(nlohmann::json::array({to_json(key), to_json(item)}));
    }
    return nlohmann::json{{"__dict__", items}};
  }
  switch (object.construction) {
    case PythonConstruction::kGlobal:
      return nlohmann::json{{"__global__", object.class_name}};
    case PythonConstruction::kReduce:
    case PythonConstruction::kNewObj: {
      nlohmann::json call{
          {object.construction == PythonConstruction::kReduce ? "__call__" : "__new__",
           object.class_name},
          {"args", array_json(object.arguments)}};
      if (object.state) call["state"] = to_json(*object.state);
      if (!object.list_items.empty()) call["listitems"] = array_json(object.list_items);
      if (!object.dict_items.empty()) {
        nlohmann::json items = nlohmann::json::array();
        for (const auto& [key, item] : object.dict_items) {
          items.push_back(nlohmann::json::array({to_json(key), to_json(item)}));
        }
        call["dictitems"] = items;
      }
      return call;
    }
    case PythonConstruction::kDecoded:
      break;
  }
  nlohmann::json attributes = {{"__class__", object.class_name}};
  for (const auto& [name, attribute] : object.attributes) attributes[name] = to_json(attribute);
  return attributes;
}

}  // namespace

nlohmann::json to_json(const c10::IValue& value) {
  if (value.isNone()) return nullptr;
  if (value.isBool()) return value.toBool();
  if (value.isInt()) return value.toInt();
  if (value.isDouble()) return float_json(value.toDouble());
  if (value.isComplexDouble()) {
    const c10::complex<double> z = value.toComplexDouble();
    return nlohmann::json{{"__complex__", {float_json(z.real()), float_json(z.imag())}}};
  }
  if (value.isString()) return value.toStringRef();
  if (value.isTensor()) return describe_tensor(value.toTensor());
  if (value.isTuple()) return array_json(value.toTupleRef().elements());
  if (value.isList()) return array_json(value.toListRef());
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
    return python_object_json(value, *object);
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
