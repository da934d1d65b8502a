#include "format/pickle/python_objects.h"

#include "format/pickle/python_int.h"

#include <dcpp/core/checkpoint_error.h>
#include <dcpp/format/python_values.h>

#include <ATen/ATen.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

namespace dcpp::detail {
namespace {

// A numpy dtype dcpp reads: its kind and size ("f4"), and the torch dtype holding its bits.
struct NumpyDtype {
  const char* code;
  at::ScalarType dtype;
};

constexpr NumpyDtype kNumpyDtypes[] = {
    {"b1", at::kBool},         {"i1", at::kChar},           {"u1", at::kByte},
    {"i2", at::kShort},        {"u2", at::kShort},          {"i4", at::kInt},
    {"u4", at::kInt},          {"i8", at::kLong},           {"u8", at::kLong},
    {"f2", at::kHalf},         {"f4", at::kFloat},          {"f8", at::kDouble},
    {"c8", at::kComplexFloat}, {"c16", at::kComplexDouble},
};

const NumpyDtype* find_numpy_dtype(std::string_view code) {
  for (const NumpyDtype& entry : kNumpyDtypes) {
    if (code == entry.code) return &entry;
  }
  return nullptr;
}

bool is_builtin(const PyObject& object, std::string_view name) {
  return object.is_global("builtins", name) || object.is_global("__builtin__", name);
}

bool is_reconstruct(const PyObject& object) {
  return object.is_global("numpy.core.multiarray", "_reconstruct") ||
         object.is_global("numpy._core.multiarray", "_reconstruct");
}

class Decoder {
 public:
  Decoder(const std::function<c10::IValue(const PyObject&)>& convert, std::string_view what)
      : convert_(convert), what_(what) {}

  [[noreturn]] void fail(const std::string& problem) const {
    throw CheckpointError(ErrorKind::kCorrupt, std::string(what_) + ": " + printable(problem));
  }

  std::optional<c10::IValue> decode(const PyObject& object) const {
    if (object.kind == PyKind::kReduce && is_reconstruct(object.callable())) return array(object);
    if (object.is_instance_of("argparse", "Namespace")) return name_space(object);
    if (object.kind != PyKind::kReduce || object.has_more_than_call()) return std::nullopt;
    const auto& args = object.args().items;
    if (object.is_instance_of("_codecs", "encode") && args.size() == 2 &&
        args[0]->kind == PyKind::kStr && args[1]->kind == PyKind::kStr &&
        args[1]->text == "latin1") {
      return python_bytes_value(bytes(object));
    }
    if (is_builtin(object.callable(), "bytes") && args.empty()) return python_bytes_value("");
    const bool frozen = is_builtin(object.callable(), "frozenset");
    if ((frozen || is_builtin(object.callable(), "set")) && args.size() <= 1 &&
        (args.empty() || args[0]->kind == PyKind::kList)) {
      std::vector<c10::IValue> items;
      if (!args.empty()) {
        items.reserve(args[0]->items.size());
        for (const PyObject* item : args[0]->items) items.push_back(convert_(*item));
      }
      return python_set_value(std::move(items), frozen);
    }
    return std::nullopt;
  }

 private:
  // numpy.ndarray's pickle: _reconstruct(ndarray, (0,), b'b') with the state
  // (1, shape, dtype, is_fortran, bytes).
  // An array dcpp cannot hold as a tensor (a big-endian, structured or object array, a subclass)
  // gives nullopt: it is kept as the calls its pickle describes.
  std::optional<c10::IValue> array(const PyObject& object) const {
    if (object.list_items() != nullptr || object.dict_items() != nullptr) return std::nullopt;
    const auto& args = object.args().items;
    if (args.size() != 3 || !args[0]->is_global("numpy", "ndarray")) return std::nullopt;
    const PyObject* state = object.state();
    if (state == nullptr || state->kind != PyKind::kTuple || state->items.size() != 5) {
      fail("holds a numpy array without its (version, shape, dtype, order, data) state");
    }
    const auto& fields = state->items;
    std::vector<int64_t> shape;
    if (fields[1]->kind != PyKind::kTuple) fail("holds a numpy array whose shape is not a tuple");
    int64_t numel = 1;
    for (const PyObject* size : fields[1]->items) {
      if (size->kind != PyKind::kInt || size->int_value < 0 ||
          __builtin_mul_overflow(numel, size->int_value, &numel)) {
        fail("holds a numpy array with a malformed shape");
      }
      shape.push_back(size->int_value);
    }
    const std::optional<std::pair<std::string, std::string>> code_and_order = dtype(*fields[2]);
    if (!code_and_order) return std::nullopt;
    const auto& [code, byte_order] = *code_and_order;
    const NumpyDtype* entry = find_numpy_dtype(code);
    if (entry == nullptr) return std::nullopt;
    const std::size_t item = c10::elementSize(entry->dtype);
    if (byte_order == ">" && item > 1) return std::nullopt;
    if (fields[3]->kind != PyKind::kBool) fail("holds a numpy array whose order is not a bool");
    if (fields[4]->kind != PyKind::kBytes && !fields[4]->is_instance_of("_codecs", "encode")) {
      return std::nullopt;  // an object array's items
    }
    const std::string data = bytes(*fields[4]);
    int64_t expected = 0;
    if (__builtin_mul_overflow(numel, static_cast<int64_t>(item), &expected) ||
        static_cast<uint64_t>(expected) != data.size()) {
      fail("holds a numpy array of " + std::to_string(numel) + " '" + code + "' elements in " +
           std::to_string(data.size()) + " bytes");
    }
    if (entry->dtype == at::kBool &&
        std::any_of(data.begin(), data.end(), [](char b) { return b != 0 && b != 1; })) {
      fail("holds a numpy bool array with a byte other than 0 and 1");
    }
    const bool fortran = fields[3]->bool_value;
    // A Fortran-ordered array's bytes are those of its transpose in C order.
    std::vector<int64_t> stored(shape);
    if (fortran) std::reverse(stored.begin(), stored.end());
    at::Tensor array = at::empty(stored, at::TensorOptions().dtype(entry->dtype));
    if (!data.empty()) std::memcpy(array.data_ptr(), data.data(), data.size());
    if (fortran && shape.size() > 1) {
      std::vector<int64_t> reverse(shape.size());
      for (std::size_t i = 0; i < reverse.size(); ++i) reverse[i] = reverse.size() - 1 - i;
      array = array.permute(reverse).contiguous();
    }
    const std::string order = item == 1 ? "|" : "<";
    return numpy_array_value(array, order + code);
  }

  // numpy.dtype's pickle: dtype(code, False, True) with the state
  // (3, byte order, None, None, None, -1, -1, 0). Returns the code and the byte order; nullopt for
  // a dtype that is not a plain one (structured, with a malformed state, not a dtype at all).
  std::optional<std::pair<std::string, std::string>> dtype(const PyObject& object) const {
    if (!object.is_instance_of("numpy", "dtype") || object.args().items.empty() ||
        object.args().items[0]->kind != PyKind::kStr) {
      return std::nullopt;
    }
    std::string byte_order = "|";
    const PyObject* state = object.state();
    if (state != nullptr) {
      if (state->kind != PyKind::kTuple || state->items.size() < 2 ||
          state->items[1]->kind != PyKind::kStr ||
          (state->items.size() >= 3 && state->items[2]->kind != PyKind::kNone)) {
        return std::nullopt;
      }
      byte_order = state->items[1]->text;
    }
    return std::make_pair(std::string(object.args().items[0]->text), byte_order);
  }

  // Python bytes: a bytes object (protocol 3 and later) or protocol 2's
  // _codecs.encode(str, 'latin1'), whose str holds one code point below 256 per byte.
  std::string bytes(const PyObject& object) const {
    if (object.kind == PyKind::kBytes) return std::string(object.text);
    const auto& args = object.args().items;
    if (!object.is_instance_of("_codecs", "encode") || args.size() != 2 ||
        args[0]->kind != PyKind::kStr || args[1]->kind != PyKind::kStr ||
        args[1]->text != "latin1") {
      fail("holds a numpy array whose data is a " + describe(object) + ", not bytes");
    }
    const std::string_view text = args[0]->text;  // UTF-8
    std::string out;
    out.reserve(text.size());
    for (std::size_t i = 0; i < text.size(); ++i) {
      const auto lead = static_cast<unsigned char>(text[i]);
      if (lead < 0x80) {
        out.push_back(static_cast<char>(lead));
      } else if ((lead == 0xC2 || lead == 0xC3) && i + 1 < text.size() &&
                 (static_cast<unsigned char>(text[i + 1]) & 0xC0) == 0x80) {
        out.push_back(static_cast<char>(((lead & 0x03) << 6) |
                                        (static_cast<unsigned char>(text[++i]) & 0x3F)));
      } else {
        fail("holds latin1 bytes with a character above U+00FF");
      }
    }
    return out;
  }

  // argparse.Namespace's pickle: NEWOBJ with no arguments, then its __dict__. Another shape is
  // kept as the call it describes (nullopt).
  std::optional<c10::IValue> name_space(const PyObject& object) const {
    if (object.kind != PyKind::kNewObj || !object.args().items.empty() ||
        object.list_items() != nullptr || object.dict_items() != nullptr) {
      return std::nullopt;
    }
    const PyObject* state = object.state();
    if (state != nullptr && state->kind != PyKind::kDict) return std::nullopt;
    std::vector<std::pair<std::string, c10::IValue>> attributes;
    if (state != nullptr) {
      for (std::size_t i = 0; i < state->dict_size(); ++i) {
        if (state->key(i).kind != PyKind::kStr) return std::nullopt;
      }
      for (std::size_t i = 0; i < state->dict_size(); ++i) {
        attributes.emplace_back(state->key(i).text, convert_(state->value(i)));
      }
    }
    return python_object_value(kNamespaceClass, std::move(attributes));
  }

  const std::function<c10::IValue(const PyObject&)>& convert_;
  std::string_view what_;
};

// Python bytes as protocol 2 writes them: _codecs.encode(<latin1 str>, 'latin1'). CPython 3.11+
// passes one interned 'latin1' every time, which the pickle memoizes and then refers back to.
void put_bytes(PickleWriter& writer, const void* data, std::size_t size) {
  std::string text;
  text.reserve(size * 2);
  const auto* bytes = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < size; ++i) {
    if (bytes[i] < 0x80) {
      text.push_back(static_cast<char>(bytes[i]));
    } else {
      text.push_back(static_cast<char>(0xC0 | (bytes[i] >> 6)));
      text.push_back(static_cast<char>(0x80 | (bytes[i] & 0x3F)));
    }
  }
  writer.put_global("_codecs", "encode");
  writer.put_tuple(2, [&] {
    writer.put_str(text);
    writer.put_shared_str("latin1");
  });
  writer.reduce();
}

void put_numpy_array(PickleWriter& writer, const PythonObject& object) {
  const c10::IValue* array_value = object.find("array");
  const c10::IValue* dtype_value = object.find("dtype");
  if (array_value == nullptr || dtype_value == nullptr || !array_value->isTensor() ||
      !dtype_value->isString()) {
    throw CheckpointError(
        ErrorKind::kUsage,
        "a numpy.ndarray value must have an array (a tensor) and a dtype (a str)");
  }
  const std::string& dtype = dtype_value->toStringRef();
  const NumpyDtype* entry = dtype.size() > 1 ? find_numpy_dtype(dtype.substr(1)) : nullptr;
  const at::Tensor array = array_value->toTensor().contiguous().to(at::kCPU);
  if (entry == nullptr || (dtype[0] != '<' && dtype[0] != '|') ||
      c10::elementSize(entry->dtype) != c10::elementSize(array.scalar_type())) {
    throw CheckpointError(ErrorKind::kUsage, "a numpy.ndarray value of dtype '" + dtype +
                                                 "' holds a tensor of dtype " +
                                                 c10::toString(array.scalar_type()));
  }
  writer.put_global("numpy.core.multiarray", "_reconstruct");
  writer.put_tuple(3, [&] {
    writer.put_global("numpy", "ndarray");
    writer.put_tuple(1, [&] { writer.put_int(0); });
    put_bytes(writer, "b", 1);
  });
  writer.reduce();
  writer.put_tuple(5, [&] {
    writer.put_int(1);
    writer.put_tuple(static_cast<std::size_t>(array.dim()), [&] {
      for (const int64_t size : array.sizes()) writer.put_int(size);
    });
    writer.put_global("numpy", "dtype");
    writer.put_tuple(3, [&] {
      writer.put_str(dtype.substr(1));
      writer.put_bool(false);
      writer.put_bool(true);
    });
    writer.reduce();
    writer.put_tuple(8, [&] {
      writer.put_int(3);
      writer.put_str(dtype.substr(0, 1));
      writer.put_none();
      writer.put_none();
      writer.put_none();
      writer.put_int(-1);
      writer.put_int(-1);
      writer.put_int(0);
    });
    writer.build();
    writer.put_bool(false);
    put_bytes(writer, array.data_ptr(), array.numel() * array.element_size());
  });
  writer.build();
}

void put_namespace(PickleWriter& writer, const PythonObject& object,
                   const std::function<void(const c10::IValue&)>& put) {
  writer.put_global("argparse", "Namespace");
  writer.empty_tuple();
  writer.newobj();
  writer.put_dict(object.attributes.size(), [&](std::size_t i) {
    writer.put_str(object.attributes[i].first);
    put(object.attributes[i].second);
  });
  writer.build();
}

// Protocol 2 spells Python 3's builtins module as Python 2's (pickle's fix_imports).
void put_builtin(PickleWriter& writer, std::string_view name) {
  writer.put_global("__builtin__", name);
}

const c10::IValue& attribute(const PythonObject& object, const char* name) {
  const c10::IValue* value = object.find(name);
  if (value == nullptr) {
    throw CheckpointError(ErrorKind::kUsage,
                          "a " + object.class_name + " value lacks its '" + name + "' attribute");
  }
  return *value;
}

// What Python writes for a decoded object (kDecoded).
void put_decoded(PickleWriter& writer, const PythonObject& object,
                 const std::function<void(const c10::IValue&)>& put) {
  const std::string& name = object.class_name;
  if (name == kNumpyArrayClass) {
    put_numpy_array(writer, object);
  } else if (name == kNamespaceClass) {
    put_namespace(writer, object, put);
  } else if (name == kBytesClass) {
    const c10::IValue& data = attribute(object, "data");
    if (!data.isString())
      throw CheckpointError(ErrorKind::kUsage, "a bytes value's data is no str");
    if (data.toStringRef().empty()) {
      put_builtin(writer, "bytes");  // Python: save_reduce(bytes, ())
      writer.empty_tuple();
      writer.reduce();
    } else {
      put_bytes(writer, data.toStringRef().data(), data.toStringRef().size());
    }
  } else if (name == kSetClass || name == kFrozenSetClass) {
    const c10::IValue& items = attribute(object, "items");
    if (!items.isList())
      throw CheckpointError(ErrorKind::kUsage, "a set value's items are no list");
    const c10::ArrayRef<c10::IValue> elements = items.toListRef();
    put_builtin(writer, name == kSetClass ? "set" : "frozenset");  // save_reduce(set, (list,))
    writer.put_tuple(
        1, [&] { writer.put_list(elements.size(), [&](std::size_t i) { put(elements[i]); }); });
    writer.reduce();
  } else if (name == kBigIntClass) {
    const c10::IValue& digits = attribute(object, "digits");
    if (!digits.isString())
      throw CheckpointError(ErrorKind::kUsage, "a big int's digits are no str");
    writer.put_long(twos_complement_from_decimal(digits.toStringRef()));
  } else if (name == kDictClass) {
    const c10::IValue& items = attribute(object, "items");
    const auto pairs = items.isList() ? items.toListRef() : c10::ArrayRef<c10::IValue>();
    for (const c10::IValue& pair : pairs) {
      if (!pair.isTuple() || pair.toTupleRef().elements().size() != 2) {
        throw CheckpointError(ErrorKind::kUsage,
                              "a builtins.dict value's items must be (key, value) tuples");
      }
    }
    writer.put_dict(pairs.size(), [&](std::size_t i) {
      put(pairs[i].toTupleRef().elements()[0]);
      put(pairs[i].toTupleRef().elements()[1]);
    });
  } else {
    throw CheckpointError(ErrorKind::kUsage, "dcpp cannot torch.save a decoded Python " + name +
                                                 " (it decodes numpy.ndarray, argparse.Namespace, "
                                                 "bytes, set, frozenset, int and dict)");
  }
}

// A global, or the call of one with its arguments and state, as its pickle described it.
void put_call(PickleWriter& writer, const PythonObject& object,
              const std::function<void(const c10::IValue&)>& put) {
  writer.put_global(object.module, object.name);
  if (object.construction == PythonConstruction::kGlobal) return;
  writer.put_tuple(object.arguments.size(), [&] {
    for (const c10::IValue& argument : object.arguments) put(argument);
  });
  if (object.construction == PythonConstruction::kReduce) {
    writer.reduce();
  } else {
    writer.newobj();
  }
  // Python's order (save_reduce): the list items, the dict items, then the state.
  writer.append_items(object.list_items.size(), [&](std::size_t i) { put(object.list_items[i]); });
  writer.set_items(object.dict_items.size(), [&](std::size_t i) {
    put(object.dict_items[i].first);
    put(object.dict_items[i].second);
  });
  if (object.state) {
    put(*object.state);
    writer.build();
  }
}

}  // namespace

std::optional<c10::IValue> decode_python_object(
    const PyObject& object, const std::function<c10::IValue(const PyObject&)>& convert,
    std::string_view what) {
  if (object.kind == PyKind::kGlobal)
    return python_global_value(std::string(object.text), std::string(object.name()));
  if (object.kind != PyKind::kReduce && object.kind != PyKind::kNewObj) return std::nullopt;
  if (std::optional<c10::IValue> decoded = Decoder(convert, what).decode(object)) return decoded;
  std::vector<c10::IValue> arguments;
  arguments.reserve(object.args().items.size());
  for (const PyObject* argument : object.args().items) arguments.push_back(convert(*argument));
  std::optional<c10::IValue> state;
  if (object.state() != nullptr) state = convert(*object.state());
  c10::IValue value = python_call_value(
      object.kind == PyKind::kReduce ? PythonConstruction::kReduce : PythonConstruction::kNewObj,
      std::string(object.callable().text), std::string(object.callable().name()),
      std::move(arguments), std::move(state));
  if (object.list_items() == nullptr && object.dict_items() == nullptr) return value;
  // A list or dict subclass (collections.defaultdict): the items set on the object.
  auto* made = const_cast<PythonObject*>(python_object_of(value));
  if (const PyObject* items = object.list_items()) {
    for (const PyObject* item : items->items) made->list_items.push_back(convert(*item));
  }
  if (const PyObject* items = object.dict_items()) {
    for (std::size_t i = 0; i < items->dict_size(); ++i) {
      made->dict_items.emplace_back(convert(items->key(i)), convert(items->value(i)));
    }
  }
  return value;
}

bool put_python_object(PickleWriter& writer, const c10::IValue& value,
                       const std::function<void(const c10::IValue&)>& put) {
  const PythonObject* object = python_object_of(value);
  if (object == nullptr) return false;
  if (object->construction == PythonConstruction::kDecoded) {
    put_decoded(writer, *object, put);
  } else {
    put_call(writer, *object, put);
  }
  return true;
}

std::optional<at::ScalarType> torch_dtype_of_numpy(std::string_view code) {
  const NumpyDtype* entry = find_numpy_dtype(code);
  return entry == nullptr ? std::nullopt : std::optional<at::ScalarType>(entry->dtype);
}

}  // namespace dcpp::detail
