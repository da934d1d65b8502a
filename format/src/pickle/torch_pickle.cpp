// data.pkl of `torch.save` archives (see torch_pickle.h).
//
// What Python 2.x writes (pickle protocol 2) for a tensor of a dtype with a typed storage class:
//   GLOBAL torch._utils._rebuild_tensor_v2, MARK,
//     MARK 'storage' GLOBAL torch.<X>Storage '<key>' 'cpu' <numel> TUPLE BINPERSID,
//     <storage_offset>, (sizes), (strides), <requires_grad>, GLOBAL collections.OrderedDict ()
//     REDUCE,
//   TUPLE REDUCE
// and for a dtype without one (complex32, float8 types) `_rebuild_tensor_v3` over
// `torch.storage.UntypedStorage` (numel in bytes) with the dtype global as a 7th argument.
// Strings, tuples, lists, dicts, globals and REDUCE results are memoized in the order Python does;
// the globals and the strings 'storage' and 'cpu' are single objects in Python, so repeated tensors
// fetch them with BINGET.

#include "format/pickle/torch_pickle.h"

#include "format/pickle/pickle_reader.h"
#include "format/pickle/pickle_writer.h"
#include "format/pickle/python_int.h"
#include "format/pickle/python_objects.h"

#include <dcpp/core/checkpoint_error.h>
#include <dcpp/format/python_values.h>
#include <dcpp/state_dict/whole_value.h>

#include <ATen/core/Dict.h>
#include <ATen/core/List.h>
#include <ATen/core/jit_type.h>

#include <dcpp/core/torch_compat.h>

#include <cctype>
#include <optional>
#include <unordered_map>
#include <utility>

namespace dcpp::detail {

namespace {

struct DtypeName {
  at::ScalarType dtype;
  const char* python_name;
  const char* storage_class;  // nullptr: Python writes _rebuild_tensor_v3 over UntypedStorage
};

constexpr DtypeName kDtypes[] = {
    {at::kFloat, "float32", "FloatStorage"},
    {at::kDouble, "float64", "DoubleStorage"},
    {at::kHalf, "float16", "HalfStorage"},
    {at::kBFloat16, "bfloat16", "BFloat16Storage"},
    {at::kLong, "int64", "LongStorage"},
    {at::kInt, "int32", "IntStorage"},
    {at::kShort, "int16", "ShortStorage"},
    {at::kChar, "int8", "CharStorage"},
    {at::kByte, "uint8", "ByteStorage"},
    {at::kBool, "bool", "BoolStorage"},
    {at::kComplexFloat, "complex64", "ComplexFloatStorage"},
    {at::kComplexDouble, "complex128", "ComplexDoubleStorage"},
    {at::kComplexHalf, "complex32", nullptr},
#ifdef DCPP_HAS_FLOAT8
    {at::ScalarType::Float8_e5m2, "float8_e5m2", nullptr},
    {at::ScalarType::Float8_e4m3fn, "float8_e4m3fn", nullptr},
#endif
};

// Every dtype name of PyTorch 2.x's `torch` module, whether or not this libtorch has it.
constexpr std::string_view kPythonDtypeNames[] = {
    "float32",        "float64",         "float16",       "bfloat16",        "int64",
    "int32",          "int16",           "int8",          "uint8",           "bool",
    "complex32",      "complex64",       "complex128",    "uint16",          "uint32",
    "uint64",         "float8_e5m2",     "float8_e4m3fn", "float8_e5m2fnuz", "float8_e4m3fnuz",
    "float8_e8m0fnu", "qint8",           "quint8",        "qint32",          "quint4x2",
    "quint2x4",       "bits8",           "bits16",        "bits1x8",         "bits2x4",
    "bits4x2",        "float4_e2m1fn_x2"};

const DtypeName* find_dtype(at::ScalarType dtype) {
  for (const DtypeName& entry : kDtypes) {
    if (entry.dtype == dtype) return &entry;
  }
  return nullptr;
}

// ---- encoding ----

void put_int_tuple(PickleWriter& writer, const std::vector<int64_t>& values) {
  writer.put_tuple(values.size(), [&] {
    for (int64_t v : values) writer.put_int(v);
  });
}

/// Pushes `_rebuild_tensor_v2/v3(...)` REDUCE for `tensor` onto the writer's stack.
void put_tensor(PickleWriter& writer, const TensorRef& tensor) {
  const DtypeName* entry = find_dtype(tensor.dtype);
  if (entry == nullptr) {
    throw CheckpointError(ErrorKind::kUsage,
                          std::string("torch.save cannot write a tensor of dtype ") +
                              c10::toString(tensor.dtype) + " (quantized or unknown to dcpp)");
  }
  const bool v3 = entry->storage_class == nullptr;
  int64_t numel = tensor.storage_numel;
  if (v3) {
    numel *= static_cast<int64_t>(c10::elementSize(tensor.dtype));
  }
  writer.put_global("torch._utils", v3 ? "_rebuild_tensor_v3" : "_rebuild_tensor_v2");
  writer.put_tuple(v3 ? 7 : 6, [&] {
    writer.put_tuple(5, [&] {
      writer.put_shared_str("storage");
      if (v3) {
        writer.put_global("torch.storage", "UntypedStorage");
      } else {
        writer.put_global("torch", entry->storage_class);
      }
      writer.put_str(tensor.storage_key);
      writer.put_shared_str("cpu");
      writer.put_int(numel);
    });
    writer.binpersid();
    writer.put_int(tensor.storage_offset);
    put_int_tuple(writer, tensor.sizes);
    put_int_tuple(writer, tensor.strides);
    writer.put_bool(tensor.requires_grad);
    writer.put_global("collections", "OrderedDict");
    writer.empty_tuple();
    writer.reduce();
    if (v3) {
      writer.put_global("torch", entry->python_name);
    }
  });
  writer.reduce();
}

void put_value(PickleWriter& writer, const c10::IValue& value, std::vector<at::Tensor>& tensors,
               int depth) {
  if (depth > 1000) {
    throw CheckpointError(ErrorKind::kUsage, "torch.save value nests deeper than 1000 levels");
  }
  if (value.isNone()) {
    writer.put_none();
  } else if (value.isBool()) {
    writer.put_bool(value.toBool());
  } else if (value.isInt()) {
    writer.put_int(value.toInt());
  } else if (value.isDouble()) {
    writer.put_float(value.toDouble());
  } else if (value.isComplexDouble()) {
    const c10::complex<double> z = value.toComplexDouble();
    writer.put_global("__builtin__", "complex");
    writer.put_tuple(2, [&] {
      writer.put_float(z.real());
      writer.put_float(z.imag());
    });
    writer.reduce();
  } else if (value.isString()) {
    writer.put_str(value.toStringRef());
  } else if (const c10::IValue* whole = whole_value_of(value)) {
    put_value(writer, *whole, tensors, depth + 1);  // saved whole: what it holds
  } else if (put_python_object(writer, value, [&](const c10::IValue& part) {
               put_value(writer, part, tensors, depth + 1);
             })) {
    // a numpy array or an argparse.Namespace (python_objects.h)
  } else if (value.isTuple()) {
    const auto& elements = value.toTupleRef().elements();
    writer.put_tuple(elements.size(), [&] {
      for (const c10::IValue& e : elements) put_value(writer, e, tensors, depth + 1);
    });
  } else if (value.isList()) {
    const c10::ArrayRef<c10::IValue> items = value.toListRef();
    writer.put_list(items.size(),
                    [&](std::size_t i) { put_value(writer, items[i], tensors, depth + 1); });
  } else if (value.isGenericDict()) {
    const c10::impl::GenericDict dict = value.toGenericDict();
    const c10::TypePtr key_type = dict.keyType();
    if (key_type->kind() != c10::TypeKind::StringType &&
        key_type->kind() != c10::TypeKind::IntType) {
      throw CheckpointError(ErrorKind::kUsage,
                            "torch.save of a dict with " + key_type->str() +
                                " keys: dcpp writes dicts with str or int keys only");
    }
    std::vector<std::pair<c10::IValue, c10::IValue>> entries;
    entries.reserve(dict.size());
    for (const auto& entry : dict) entries.emplace_back(entry.key(), entry.value());
    writer.put_dict(entries.size(), [&](std::size_t i) {
      put_value(writer, entries[i].first, tensors, depth + 1);
      put_value(writer, entries[i].second, tensors, depth + 1);
    });
  } else if (value.isTensor()) {
    const at::Tensor& tensor = value.toTensor();
    if (!tensor.defined()) {
      throw CheckpointError(ErrorKind::kUsage, "torch.save of an undefined tensor");
    }
    TensorRef ref;
    ref.storage_key = std::to_string(tensors.size());
    ref.dtype = tensor.scalar_type();
    ref.storage_numel = tensor.numel();
    ref.sizes = tensor.sizes().vec();
    ref.strides = row_major_strides(tensor.sizes());
    ref.requires_grad = tensor.requires_grad();
    put_tensor(writer, ref);
    tensors.push_back(tensor);
  } else {
    throw CheckpointError(ErrorKind::kUsage,
                          "dcpp cannot torch.save a value of type " + value.tagKind() +
                              " (only None, bool, int, float, complex, str, tuple, list, dict with "
                              "str or int keys, and tensors)");
  }
}

// ---- decoding ----

bool is_storage_class(std::string_view name) {
  for (const DtypeName& entry : kDtypes) {
    if (entry.storage_class != nullptr && name == entry.storage_class) return true;
  }
  return false;
}

bool allow_tensor_global(std::string_view module, std::string_view name) {
  if (module == "torch._utils") {
    return name == "_rebuild_tensor_v2" || name == "_rebuild_tensor_v3" ||
           name == "_rebuild_parameter";
  }
  if (module == "torch") {
    return is_storage_class(name) || is_python_dtype_name(name);
  }
  return (module == "torch.storage" && name == "UntypedStorage") ||
         (module == "collections" && name == "OrderedDict");
}

// A value pickle may name any global: none is imported or called, each is kept as data. The VM
// still refuses those that would run code in a Python program (runs_code_when_unpickled).
bool allow_value_global(std::string_view, std::string_view) { return true; }

class TensorDecoder {
 public:
  explicit TensorDecoder(std::string_view what) : what_(what) {}

  [[noreturn]] void fail(const std::string& problem) const {
    throw CheckpointError(ErrorKind::kCorrupt,
                          std::string(what_) + ": data.pkl " + printable(problem));
  }

  int64_t get_int(const PyObject& object, const char* field) const {
    if (object.kind != PyKind::kInt) {
      fail(std::string(field) + " is a " + describe(object) + ", not an int");
    }
    return object.int_value;
  }

  std::vector<int64_t> get_int_tuple(const PyObject& object, const char* field) const {
    if (object.kind != PyKind::kTuple) {
      fail(std::string(field) + " is a " + describe(object) + ", not a tuple");
    }
    std::vector<int64_t> values;
    values.reserve(object.items.size());
    for (const PyObject* item : object.items) {
      const int64_t v = get_int(*item, field);
      if (v < 0) fail(std::string(field) + " holds the negative value " + std::to_string(v));
      values.push_back(v);
    }
    return values;
  }

  /// True when `object` is a rebuilt tensor (v2, v3 or a Parameter around one).
  static bool is_tensor(const PyObject& object) {
    return object.is_instance_of("torch._utils", "_rebuild_tensor_v2") ||
           object.is_instance_of("torch._utils", "_rebuild_tensor_v3") ||
           object.is_instance_of("torch._utils", "_rebuild_parameter");
  }

  TensorRef decode(const PyObject& object) const {
    if (object.kind != PyKind::kReduce || object.has_more_than_call() || !is_tensor(object)) {
      fail("holds a " + describe(object) + ", not a rebuilt tensor");
    }
    const auto& args = object.args().items;
    if (object.callable().name() == "_rebuild_parameter") {
      // _rebuild_parameter(data, requires_grad, backward_hooks): an nn.Parameter.
      if (args.size() != 3 || args[0]->kind != PyKind::kReduce ||
          object.callable().name() == args[0]->callable().name()) {
        fail("has a malformed _rebuild_parameter call");
      }
      TensorRef ref = decode(*args[0]);
      if (args[1]->kind != PyKind::kBool) fail("Parameter requires_grad is not a bool");
      ref.requires_grad = args[1]->bool_value;
      return ref;
    }
    const bool v3 = object.callable().name() == "_rebuild_tensor_v3";
    // v2: (storage, offset, size, stride, requires_grad, hooks[, metadata])
    // v3: (storage, offset, size, stride, requires_grad, hooks, dtype[, metadata])
    const std::size_t base = v3 ? 7 : 6;
    if (args.size() != base && args.size() != base + 1) {
      fail("calls " + std::string(object.callable().name()) + " with " +
           std::to_string(args.size()) + " arguments");
    }
    if (args.size() == base + 1 && args[base]->kind != PyKind::kNone &&
        !(args[base]->kind == PyKind::kDict && args[base]->items.empty())) {
      fail("has tensor metadata (" + describe(*args[base]) + "), which dcpp does not read");
    }
    const PyObject& storage = *args[0];
    if (storage.kind != PyKind::kPersistent || storage.pid().kind != PyKind::kTuple ||
        storage.pid().items.size() != 5) {
      fail("has a storage that is a " + describe(storage) +
           ", not a persistent ('storage', class, key, location, numel)");
    }
    const auto& pid = storage.pid().items;
    if (pid[0]->kind != PyKind::kStr || pid[0]->text != "storage") {
      fail("has a persistent id that is not a storage");
    }
    TensorRef ref;
    const PyObject& storage_class = *pid[1];
    if (storage_class.kind != PyKind::kGlobal) {
      fail("has a storage class that is a " + describe(storage_class));
    }
    int64_t numel = get_int(*pid[4], "storage numel");
    if (numel < 0) fail("has a negative storage size");
    if (v3) {
      if (!storage_class.is_global("torch.storage", "UntypedStorage")) {
        fail("calls _rebuild_tensor_v3 with storage class " + std::string(storage_class.text) +
             "." + std::string(storage_class.name()));
      }
      const PyObject& dtype = *args[6];
      if (dtype.kind != PyKind::kGlobal || dtype.text != "torch") {
        fail("has a dtype that is a " + describe(dtype));
      }
      ref.dtype = dtype_from_python_name(dtype.name(), what_);
      const auto item = static_cast<int64_t>(c10::elementSize(ref.dtype));
      if (numel % item != 0) {
        fail("has an untyped storage of " + std::to_string(numel) +
             " bytes, not a whole number of " + std::string(dtype.name()) + " elements");
      }
      numel /= item;
    } else {
      if (storage_class.text != "torch" || !is_storage_class(storage_class.name())) {
        fail("has storage class " + std::string(storage_class.text) + "." +
             std::string(storage_class.name()));
      }
      ref.dtype = dtype_from_storage_class(storage_class.name());
    }
    if (pid[2]->kind != PyKind::kStr || pid[2]->text.empty() || pid[2]->text.size() > 64) {
      fail("has a storage key that is not a short str");
    }
    for (char c : pid[2]->text) {
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') {
        fail("has the storage key '" + std::string(pid[2]->text) +
             "' (expected letters, digits, '_')");
      }
    }
    if (pid[3]->kind != PyKind::kStr) fail("has a storage location that is not a str");
    ref.storage_key = pid[2]->text;
    ref.storage_numel = numel;
    ref.storage_offset = get_int(*args[1], "storage_offset");
    if (ref.storage_offset < 0) fail("has a negative storage offset");
    ref.sizes = get_int_tuple(*args[2], "size");
    ref.strides = get_int_tuple(*args[3], "stride");
    if (args[4]->kind != PyKind::kBool) fail("has requires_grad that is not a bool");
    ref.requires_grad = args[4]->bool_value;
    if (args[5]->kind != PyKind::kDict || !args[5]->items.empty()) {
      fail("has backward hooks (" + describe(*args[5]) + "), which dcpp does not read");
    }
    check_bounds(ref);
    return ref;
  }

  void check_bounds(const TensorRef& ref) const {
    if (ref.sizes.size() != ref.strides.size()) {
      fail("has " + std::to_string(ref.sizes.size()) + " sizes but " +
           std::to_string(ref.strides.size()) + " strides");
    }
    int64_t bytes = 0;
    if (__builtin_mul_overflow(ref.storage_numel, static_cast<int64_t>(c10::elementSize(ref.dtype)),
                               &bytes)) {
      fail("has a storage too large to address");
    }
    int64_t numel = 1;
    int64_t last = ref.storage_offset;  // index of the last element the view touches
    for (std::size_t i = 0; i < ref.sizes.size(); ++i) {
      int64_t extent = 0;
      if (__builtin_mul_overflow(numel, ref.sizes[i], &numel) ||
          (ref.sizes[i] > 0 && (__builtin_mul_overflow(ref.sizes[i] - 1, ref.strides[i], &extent) ||
                                __builtin_add_overflow(last, extent, &last)))) {
        fail("has sizes and strides too large to address");
      }
    }
    if (numel > 0 && last >= ref.storage_numel) {
      fail("describes a view (offset " + std::to_string(ref.storage_offset) +
           ") reaching element " + std::to_string(last) + " of a storage of " +
           std::to_string(ref.storage_numel) + " elements");
    }
  }

 private:
  std::string_view what_;
};

class ValueDecoder {
 public:
  ValueDecoder(const std::function<at::Tensor(const TensorRef&)>& load_tensor,
               std::string_view what)
      : load_tensor_(load_tensor), what_(what), tensors_(what) {}

  [[noreturn]] void fail(const std::string& problem) const {
    throw CheckpointError(ErrorKind::kCorrupt, std::string(what_) + ": " + printable(problem));
  }

  c10::IValue convert(const PyObject& object, int depth) {
    if (depth > 1000) fail("the value nests deeper than 1000 levels");
    switch (object.kind) {
      case PyKind::kNone:
        return c10::IValue();
      case PyKind::kBool:
        return c10::IValue(object.bool_value);
      case PyKind::kInt:
        return c10::IValue(object.int_value);
      case PyKind::kFloat:
        return c10::IValue(object.float_value);
      case PyKind::kBigInt:
        return int_value_of_normal_digits(decimal_from_twos_complement(object.text));
      default:
        break;
    }
    // Shared nodes convert once (as Python shares objects); a node met again while it is being
    // converted is a cycle, which IValues cannot hold.
    auto done = converted_.find(&object);
    if (done != converted_.end()) {
      if (!done->second.has_value())
        fail("the value contains itself (a recursive " + describe(object) + ")");
      return *done->second;
    }
    converted_.emplace(&object, std::nullopt);
    c10::IValue result = convert_shared(object, depth);
    converted_[&object] = result;
    return result;
  }

 private:
  c10::IValue convert_shared(const PyObject& object, int depth) {
    switch (object.kind) {
      case PyKind::kStr:
        return c10::IValue(std::string(object.text));
      case PyKind::kTuple: {
        std::vector<c10::IValue> elements;
        elements.reserve(object.items.size());
        for (const PyObject* item : object.items) elements.push_back(convert(*item, depth + 1));
        return c10::IValue(c10::ivalue::Tuple::create(std::move(elements)));
      }
      case PyKind::kList: {
        c10::impl::GenericList list(c10::AnyType::get());
        list.reserve(object.items.size());
        for (const PyObject* item : object.items) list.push_back(convert(*item, depth + 1));
        return c10::IValue(list);
      }
      case PyKind::kBytes:
        return python_bytes_value(std::string(object.text));
      case PyKind::kSet:
      case PyKind::kFrozenSet: {
        std::vector<c10::IValue> items;
        items.reserve(object.items.size());
        for (const PyObject* item : object.items) items.push_back(convert(*item, depth + 1));
        return python_set_value(std::move(items), object.kind == PyKind::kFrozenSet);
      }
      case PyKind::kDict:
        return convert_dict(object, depth);
      case PyKind::kPersistent:
        throw CheckpointError(
            ErrorKind::kIncompatible,
            std::string(what_) +
                ": data.pkl holds a storage reference (persistent id) outside the calls dcpp "
                "rebuilds tensors with (_rebuild_tensor_v2, _rebuild_tensor_v3, "
                "_rebuild_parameter): a tensor of a kind dcpp cannot represent (quantized, sparse, "
                "a subclass); save it as a plain tensor");
      case PyKind::kReduce:
        if (object.is_instance_of("__builtin__", "complex") ||
            object.is_instance_of("builtins", "complex")) {
          const auto& args = object.args().items;
          if (object.has_more_than_call() || args.size() != 2 || args[0]->kind != PyKind::kFloat ||
              args[1]->kind != PyKind::kFloat) {
            fail("data.pkl has a malformed complex number");
          }
          return c10::IValue(c10::complex<double>(args[0]->float_value, args[1]->float_value));
        }
        if (TensorDecoder::is_tensor(object)) {
          return c10::IValue(load_tensor_(tensors_.decode(object)));
        }
        [[fallthrough]];
      case PyKind::kNewObj:
      case PyKind::kGlobal:
        if (std::optional<c10::IValue> value = decode_python_object(
                object, [&](const PyObject& part) { return convert(part, depth + 1); }, what_)) {
          return *std::move(value);
        }
        break;
      default:
        break;
    }
    fail("data.pkl holds a " + describe(object) + " where a value belongs");
  }

  // A dict of str keys or of int keys is a c10 dict; one of other keys (tuples, mixed kinds) a
  // "builtins.dict". Python semantics for a repeated key of a c10 dict: the last value wins, in
  // the first one's place.
  c10::IValue convert_dict(const PyObject& object, int depth) {
    const auto all_keys = [&](PyKind kind) {
      for (std::size_t i = 0; i < object.dict_size(); ++i) {
        if (object.key(i).kind != kind) return false;
      }
      return true;
    };
    const bool int_keys = object.dict_size() > 0 && all_keys(PyKind::kInt);
    if (int_keys || all_keys(PyKind::kStr)) {
      const c10::TypePtr key_type =
          int_keys ? c10::TypePtr(c10::IntType::get()) : c10::TypePtr(c10::StringType::get());
      c10::impl::GenericDict dict(key_type, c10::AnyType::get());
      dict.reserve(object.dict_size());
      for (std::size_t i = 0; i < object.dict_size(); ++i) {
        const PyObject& key = object.key(i);
        dict.insert_or_assign(
            int_keys ? c10::IValue(key.int_value) : c10::IValue(std::string(key.text)),
            convert(object.value(i), depth + 1));
      }
      return c10::IValue(dict);
    }
    std::vector<std::pair<c10::IValue, c10::IValue>> items;
    items.reserve(object.dict_size());
    for (std::size_t i = 0; i < object.dict_size(); ++i) {
      items.emplace_back(convert(object.key(i), depth + 1), convert(object.value(i), depth + 1));
    }
    return python_dict_value(std::move(items));
  }

  const std::function<at::Tensor(const TensorRef&)>& load_tensor_;
  std::string_view what_;
  TensorDecoder tensors_;
  std::unordered_map<const PyObject*, std::optional<c10::IValue>> converted_;
};

}  // namespace

std::string python_dtype_name(at::ScalarType dtype) {
  const DtypeName* entry = find_dtype(dtype);
  if (entry == nullptr) {
    throw CheckpointError(ErrorKind::kUsage,
                          std::string("dtype ") + c10::toString(dtype) +
                              " has no name in Python's torch module that dcpp knows");
  }
  return entry->python_name;
}

std::optional<at::ScalarType> find_dtype_by_python_name(std::string_view name) {
  for (const DtypeName& entry : kDtypes) {
    if (name == entry.python_name) return entry.dtype;
  }
  return std::nullopt;
}

at::ScalarType dtype_from_python_name(std::string_view name, std::string_view what) {
  if (const std::optional<at::ScalarType> dtype = find_dtype_by_python_name(name)) {
    return *dtype;
  }
  if (is_python_dtype_name(name)) {
    throw CheckpointError(ErrorKind::kIncompatible,
                          std::string(what) + ": dtype torch." + std::string(name) +
                              " is not supported by this build of dcpp and libtorch");
  }
  throw CheckpointError(ErrorKind::kIncompatible,
                        std::string(what) + ": unknown dtype torch." + printable(name));
}

bool is_python_dtype_name(std::string_view name) {
  for (std::string_view known : kPythonDtypeNames) {
    if (name == known) return true;
  }
  return false;
}

std::string storage_class_name(at::ScalarType dtype) {
  const DtypeName* entry = find_dtype(dtype);
  if (entry == nullptr || entry->storage_class == nullptr) {
    throw CheckpointError(ErrorKind::kUsage,
                          std::string("dtype ") + c10::toString(dtype) +
                              " has no typed storage class in PyTorch (torch.save writes it with "
                              "_rebuild_tensor_v3 over UntypedStorage)");
  }
  return entry->storage_class;
}

at::ScalarType dtype_from_storage_class(std::string_view name) {
  for (const DtypeName& entry : kDtypes) {
    if (entry.storage_class != nullptr && name == entry.storage_class) return entry.dtype;
  }
  throw CheckpointError(ErrorKind::kIncompatible,
                        "unknown or unsupported storage class torch." + printable(name));
}

std::string encode_tensor_pickle(const TensorRef& tensor) {
  PickleWriter writer(2);
  put_tensor(writer, tensor);
  return writer.finish();
}

std::string encode_value_pickle(const c10::IValue& value, std::vector<at::Tensor>& tensors) {
  PickleWriter writer(2);
  put_value(writer, value, tensors, 0);
  return writer.finish();
}

TensorRef decode_tensor_pickle(std::string_view pickle, std::string_view what) {
  const Unpickled tree = unpickle(pickle, allow_tensor_global, what);
  return TensorDecoder(what).decode(tree.root());
}

c10::IValue decode_value_pickle(std::string_view pickle,
                                const std::function<at::Tensor(const TensorRef&)>& load_tensor,
                                std::string_view what) {
  const Unpickled tree = unpickle(pickle, allow_value_global, what);
  return ValueDecoder(load_tensor, what).convert(tree.root(), 0);
}

std::vector<int64_t> row_major_strides(at::IntArrayRef sizes) {
  std::vector<int64_t> strides(sizes.size());
  int64_t stride = 1;
  for (std::size_t i = sizes.size(); i-- > 0;) {
    strides[i] = stride;
    stride *= std::max<int64_t>(sizes[i], 1);
  }
  return strides;
}

}  // namespace dcpp::detail
