#include "json_value.h"

#include <dcpp/checkpoint/metadata.h>

#include <cmath>
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
  return "<" + value.tagKind() + ">";
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
