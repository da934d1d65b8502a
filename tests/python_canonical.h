#pragma once
// A dcpp value as the canonical JSON that tests/fixtures/megatron-core/make_megatron_lm_fixtures.py
// writes for what Python loads (its `canonical` function, the schema in its docstring): so that a
// test compares, value for value, what dcpp reads with what Megatron's own loaders returned.

#include "dcpp_test.h"
#include "format/pickle/torch_pickle.h"

#include <dcpp/format/python_values.h>
#include <dcpp/state_dict/python_object.h>
#include <dcpp/state_dict/state_dict.h>
#include <dcpp/state_dict/whole_value.h>

#include <ATen/ATen.h>
#include <openssl/evp.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>

namespace dcpp::test {

/// The manifest beside Megatron fixture `name` (tests/fixtures/megatron-core/<name>.manifest.json).
inline nlohmann::json megatron_fixture_manifest(const std::string& name) {
  std::ifstream in(megatron_fixture(name + ".manifest.json"));
  if (!in.good()) throw std::runtime_error("no manifest for the Megatron fixture " + name);
  return nlohmann::json::parse(in);
}

/// Python's float.hex(x): "0x1.8000000000000p+0", "-0x0.0p+0", "nan", "inf", "-inf".
inline std::string python_float_hex(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  uint64_t bits = 0;
  std::memcpy(&bits, &x, sizeof bits);
  const std::string sign = (bits >> 63) != 0 ? "-" : "";
  const int exponent = static_cast<int>((bits >> 52) & 0x7ff);
  const uint64_t mantissa = bits & ((uint64_t{1} << 52) - 1);
  if (exponent == 0 && mantissa == 0) return sign + "0x0.0p+0";
  char text[64];
  if (exponent == 0) {
    std::snprintf(text, sizeof text, "0x0.%013llxp-1022",
                  static_cast<unsigned long long>(mantissa));
  } else {
    std::snprintf(text, sizeof text, "0x1.%013llxp%+d", static_cast<unsigned long long>(mantissa),
                  exponent - 1023);
  }
  return sign + text;
}

inline std::string sha256_hex(const void* data, std::size_t size) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_Digest(data, size, digest, &length, EVP_sha256(), nullptr);
  std::string hex;
  char byte[3];
  for (unsigned int i = 0; i < length; ++i) {
    std::snprintf(byte, sizeof byte, "%02x", digest[i]);
    hex += byte;
  }
  return hex;
}

inline std::string hex_of(const std::string& bytes) {
  std::string hex;
  char byte[3];
  for (const char c : bytes) {
    std::snprintf(byte, sizeof byte, "%02x", static_cast<unsigned char>(c));
    hex += byte;
  }
  return hex;
}

inline nlohmann::json tensor_canonical(const at::Tensor& tensor, const std::string& dtype) {
  const at::Tensor t = tensor.contiguous().cpu();
  return {{"dtype", dtype},
          {"shape", t.sizes().vec()},
          {"sha256", sha256_hex(t.numel() == 0 ? "" : t.data_ptr(), t.numel() * t.element_size())}};
}

/// Sorts the items of every set and frozenset by their JSON text, so that two encodings of one
/// set compare equal whatever order each listed it in.
inline nlohmann::json sorted_sets(nlohmann::json json) {
  if (json.is_array()) {
    for (auto& item : json) item = sorted_sets(item);
  } else if (json.is_object()) {
    for (auto& [key, item] : json.items()) item = sorted_sets(item);
    for (const char* kind : {"set", "frozenset"}) {
      if (json.size() == 1 && json.contains(kind) && json[kind].is_array()) {
        std::sort(
            json[kind].begin(), json[kind].end(),
            [](const nlohmann::json& a, const nlohmann::json& b) { return a.dump() < b.dump(); });
      }
    }
  }
  return json;
}

inline nlohmann::json canonical(const c10::IValue& value) {
  using nlohmann::json;
  if (const c10::IValue* whole = dcpp::whole_value_of(value)) return canonical(*whole);
  if (value.isNone()) return nullptr;
  if (value.isBool()) return value.toBool();
  if (value.isInt()) return json{{"int", std::to_string(value.toInt())}};
  if (value.isDouble()) return json{{"float", python_float_hex(value.toDouble())}};
  if (value.isComplexDouble()) {
    const c10::complex<double> z = value.toComplexDouble();
    return json{{"complex", {python_float_hex(z.real()), python_float_hex(z.imag())}}};
  }
  if (value.isString()) return value.toStringRef();
  if (value.isTensor()) {
    return json{
        {"tensor", tensor_canonical(value.toTensor(),
                                    detail::python_dtype_name(value.toTensor().scalar_type()))}};
  }
  const auto elements = [](c10::ArrayRef<c10::IValue> items) {
    json array = json::array();
    for (const c10::IValue& item : items) array.push_back(canonical(item));
    return array;
  };
  if (value.isTuple()) return json{{"tuple", elements(value.toTupleRef().elements())}};
  if (value.isList()) return elements(value.toListRef());
  if (const auto items = dcpp::python_dict_items(value)) {
    json pairs = json::array();
    for (const auto& [key, item] : *items) pairs.push_back({canonical(key), canonical(item)});
    return json{{"dict", pairs}};
  }
  const dcpp::PythonObject* object = dcpp::python_object_of(value);
  if (object == nullptr) return "<" + value.tagKind() + ">";
  if (const auto digits = dcpp::python_int_digits(value)) return json{{"int", *digits}};
  if (const auto bytes = dcpp::python_bytes_of(value)) return json{{"bytes", hex_of(*bytes)}};
  if (const auto items = dcpp::python_set_items(value)) {
    return json{{object->class_name == dcpp::kSetClass ? "set" : "frozenset", elements(*items)}};
  }
  if (object->class_name == dcpp::kNumpyArrayClass &&
      object->construction == dcpp::PythonConstruction::kDecoded) {
    const auto array = dcpp::numpy_array_of(value);
    return json{{"ndarray", tensor_canonical(array->array, array->dtype)}};
  }
  if (object->class_name == dcpp::kNamespaceClass &&
      object->construction == dcpp::PythonConstruction::kDecoded) {
    json pairs = json::array();
    for (const auto& [name, item] : object->attributes) pairs.push_back({name, canonical(item)});
    return json{{"new", dcpp::kNamespaceClass},
                {"args", {{"tuple", json::array()}}},
                {"state", {{"dict", pairs}}}};
  }
  // bytearray(b'...') is a call of the class with its bytes, which the generator shows as bytes.
  if (object->construction == dcpp::PythonConstruction::kReduce && !object->state &&
      (object->class_name == "__builtin__.bytearray" ||
       object->class_name == "builtins.bytearray") &&
      object->arguments.size() <= 1) {
    const auto bytes = object->arguments.empty() ? std::optional<std::string>("")
                                                 : dcpp::python_bytes_of(object->arguments[0]);
    if (bytes) return json{{"bytearray", hex_of(*bytes)}};
  }
  // A dict subclass is a dict to the generator: collections.Counter(dict) and the items set on a
  // collections.OrderedDict or defaultdict.
  if (object->construction == dcpp::PythonConstruction::kReduce && !object->state &&
      object->list_items.empty() && object->module == "collections") {
    if (object->name == "Counter" && object->arguments.size() == 1 && object->dict_items.empty()) {
      if (const auto items = dcpp::python_dict_items(object->arguments[0])) {
        json pairs = json::array();
        for (const auto& [key, item] : *items) pairs.push_back({canonical(key), canonical(item)});
        return json{{"dict", pairs}};
      }
    }
    if (object->name == "OrderedDict" || object->name == "defaultdict") {
      json pairs = json::array();
      for (const auto& [key, item] : object->dict_items) {
        pairs.push_back({canonical(key), canonical(item)});
      }
      return json{{"dict", pairs}};
    }
  }
  switch (object->construction) {
    case dcpp::PythonConstruction::kGlobal:
      return json{{"global", object->class_name}};
    case dcpp::PythonConstruction::kReduce:
    case dcpp::PythonConstruction::kNewObj: {
      json call{{object->construction == dcpp::PythonConstruction::kReduce ? "reduce" : "new",
                 object->class_name},
                {"args", {{"tuple", elements(object->arguments)}}},
                {"state", object->state ? canonical(*object->state) : json(nullptr)}};
      if (!object->list_items.empty()) call["listitems"] = elements(object->list_items);
      if (!object->dict_items.empty()) {
        json pairs = json::array();
        for (const auto& [key, item] : object->dict_items) {
          pairs.push_back({canonical(key), canonical(item)});
        }
        call["dictitems"] = pairs;
      }
      return call;
    }
    case dcpp::PythonConstruction::kDecoded:
      break;
  }
  return "<" + object->class_name + ">";
}

/// A state dict (the common state load_common_state_dict returns, nested) as Python's dict of it.
inline nlohmann::json canonical(const dcpp::StateDict& state);

inline nlohmann::json canonical(const dcpp::StateValue& value) {
  switch (value.kind()) {
    case dcpp::StateValue::Kind::kTensor:
      return canonical(c10::IValue(value.tensor()));
    case dcpp::StateValue::Kind::kList: {
      nlohmann::json array = nlohmann::json::array();
      for (const dcpp::StateValue& item : value.list()) array.push_back(canonical(item));
      return array;
    }
    case dcpp::StateValue::Kind::kDict:
      return canonical(value.dict());
    default:
      return canonical(value.value());
  }
}

inline nlohmann::json canonical(const dcpp::StateDict& state) {
  nlohmann::json pairs = nlohmann::json::array();
  for (const auto& item : state) pairs.push_back({item.key, canonical(item.value)});
  return nlohmann::json{{"dict", pairs}};
}

}  // namespace dcpp::test
