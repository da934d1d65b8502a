#include "convert/torch_save_pickle.h"

#include "format/pickle/pickle_writer.h"  // the opcodes (detail::op)
#include "format/pickle/torch_pickle.h"   // dtype and storage class names

#include <dcpp/core/checkpoint_error.h>
#include <dcpp/state_dict/python_object.h>
#include <dcpp/state_dict/whole_value.h>

#include <ATen/core/Dict.h>
#include <ATen/core/List.h>
#include <ATen/core/jit_type.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>

namespace dcpp::tools {

namespace {

namespace op = detail::op;

constexpr int kMaxDepth = 1000;

// PyTorch 2.x writes these dtypes over a typed storage (`torch.FloatStorage`, ...) with
// _rebuild_tensor_v2, which libtorch reads; any other over UntypedStorage with _rebuild_tensor_v3.
bool has_typed_storage(at::ScalarType dtype) {
  switch (dtype) {
    case at::kFloat:
    case at::kDouble:
    case at::kHalf:
    case at::kBFloat16:
    case at::kLong:
    case at::kInt:
    case at::kShort:
    case at::kChar:
    case at::kByte:
    case at::kBool:
    case at::kComplexFloat:
    case at::kComplexDouble:
      return true;
    default:
      return false;
  }
}

class Pickler {
 public:
  Pickler() {
    byte(op::kProto);
    byte(2);
  }

  std::string finish() {
    byte(op::kStop);
    return std::move(out_);
  }

  void value(const c10::IValue& value, std::vector<at::Tensor>& tensors, int depth) {
    if (depth > kMaxDepth) {
      throw CheckpointError(ErrorKind::kUsage, "torch.save value nests deeper than " +
                                                   std::to_string(kMaxDepth) + " levels");
    }
    if (value.isNone()) {
      byte(op::kNone);
    } else if (value.isBool()) {
      byte(value.toBool() ? op::kNewTrue : op::kNewFalse);
    } else if (value.isInt()) {
      integer(value.toInt());
    } else if (value.isDouble()) {
      floating(value.toDouble());
    } else if (value.isComplexDouble()) {
      const c10::complex<double> z = value.toComplexDouble();
      global("builtins", "complex");
      floating(z.real());
      floating(z.imag());
      byte(op::kTuple2);
      byte(op::kReduce);
    } else if (const c10::IValue* whole = whole_value_of(value)) {
      this->value(*whole, tensors, depth + 1);  // saved whole: what it holds
    } else if (const PythonObject* object = python_object_of(value)) {
      throw CheckpointError(ErrorKind::kUsage,
                            "a torch.save file of dcpp's holds what libtorch reads, and a " +
                                object->class_name +
                                " is a Python object it cannot: convert to dcp or megatron");
    } else if (value.isString()) {
      string(value.toStringRef());
    } else if (value.isTuple()) {
      const auto& elements = value.toTupleRef().elements();
      tuple(elements.size(), [&] {
        for (const c10::IValue& element : elements) this->value(element, tensors, depth + 1);
      });
    } else if (value.isList()) {
      byte(op::kEmptyList);
      const c10::ArrayRef<c10::IValue> items = value.toListRef();
      if (!items.empty()) {
        byte(op::kMark);
        for (const c10::IValue& item : items) this->value(item, tensors, depth + 1);
        byte(op::kAppends);
      }
    } else if (value.isGenericDict()) {
      dict(value.toGenericDict(), tensors, depth);
    } else if (value.isTensor()) {
      tensor(value.toTensor(), tensors);
    } else {
      throw CheckpointError(
          ErrorKind::kUsage,
          "dcpp cannot torch.save a value of type " + value.tagKind() +
              " (only None, bool, int, float, complex, str, tuple, list, dict with "
              "str or int keys, and tensors)");
    }
  }

 private:
  void byte(uint8_t b) { out_.push_back(static_cast<char>(b)); }

  void little_endian(uint64_t bits, int bytes) {
    for (int i = 0; i < bytes; ++i) byte(static_cast<uint8_t>(bits >> (8 * i)));
  }

  void integer(int64_t v) {
    if (v >= 0 && v <= 0xff) {
      byte(op::kBinInt1);
      byte(static_cast<uint8_t>(v));
    } else if (v >= 0 && v <= 0xffff) {
      byte(op::kBinInt2);
      little_endian(static_cast<uint64_t>(v), 2);
    } else if (v >= std::numeric_limits<int32_t>::min() &&
               v <= std::numeric_limits<int32_t>::max()) {
      byte(op::kBinInt);
      little_endian(static_cast<uint32_t>(static_cast<int32_t>(v)), 4);
    } else {
      // libtorch reads LONG1 only 8 bytes long; Python reads any length of two's complement.
      byte(op::kLong1);
      byte(8);
      little_endian(static_cast<uint64_t>(v), 8);
    }
  }

  void floating(double v) {
    byte(op::kBinFloat);
    uint64_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    for (int i = 7; i >= 0; --i) byte(static_cast<uint8_t>(bits >> (8 * i)));  // big-endian
  }

  void string(const std::string& text) {
    if (text.size() > std::numeric_limits<uint32_t>::max()) {
      throw CheckpointError(ErrorKind::kUsage,
                            "a string of " + std::to_string(text.size()) +
                                " bytes does not fit in a torch.save file (at most 4 GiB)");
    }
    byte(op::kBinUnicode);
    little_endian(text.size(), 4);
    out_ += text;
  }

  void global(const std::string& module, const std::string& name) {
    byte(op::kGlobal);
    out_ += module + "\n" + name + "\n";
  }

  void tuple(std::size_t size, const std::function<void()>& items) {
    if (size == 0) {
      byte(op::kEmptyTuple);
      return;
    }
    if (size > 3) byte(op::kMark);
    items();
    byte(size == 1 ? op::kTuple1 : size == 2 ? op::kTuple2 : size == 3 ? op::kTuple3 : op::kTuple);
  }

  void int_tuple(const std::vector<int64_t>& values) {
    tuple(values.size(), [&] {
      for (int64_t v : values) integer(v);
    });
  }

  void dict(const c10::impl::GenericDict& dict, std::vector<at::Tensor>& tensors, int depth) {
    const c10::TypeKind key_kind = dict.keyType()->kind();
    if (key_kind != c10::TypeKind::StringType && key_kind != c10::TypeKind::IntType) {
      throw CheckpointError(ErrorKind::kUsage,
                            "torch.save of a dict with " + dict.keyType()->str() +
                                " keys: dcpp writes dicts with str or int keys only");
    }
    byte(op::kEmptyDict);
    if (dict.empty()) return;
    byte(op::kMark);
    for (const auto& entry : dict) {
      value(entry.key(), tensors, depth + 1);
      value(entry.value(), tensors, depth + 1);
    }
    byte(op::kSetItems);
  }

  // _rebuild_tensor_v2(storage, 0, size, stride, requires_grad, OrderedDict()), or v3 with the
  // dtype after the hooks, over the persistent id ('storage', class, key, 'cpu', numel).
  void tensor(const at::Tensor& tensor, std::vector<at::Tensor>& tensors) {
    if (!tensor.defined()) {
      throw CheckpointError(ErrorKind::kUsage, "torch.save of an undefined tensor");
    }
    const at::ScalarType dtype = tensor.scalar_type();
    const bool v2 = has_typed_storage(dtype);
    // For v3, the dtype's name first: it throws for a dtype Python cannot name.
    const std::string python_dtype = v2 ? std::string() : detail::python_dtype_name(dtype);
    global("torch._utils", v2 ? "_rebuild_tensor_v2" : "_rebuild_tensor_v3");
    byte(op::kMark);
    byte(op::kMark);
    string("storage");
    if (v2) {
      global("torch", detail::storage_class_name(dtype));
    } else {
      global("torch.storage", "UntypedStorage");
    }
    string(std::to_string(tensors.size()));
    string("cpu");
    integer(v2 ? tensor.numel() : tensor.numel() * static_cast<int64_t>(c10::elementSize(dtype)));
    byte(op::kTuple);
    byte(op::kBinPersId);
    integer(0);
    int_tuple(tensor.sizes().vec());
    int_tuple(detail::row_major_strides(tensor.sizes()));
    byte(tensor.requires_grad() ? op::kNewTrue : op::kNewFalse);
    global("collections", "OrderedDict");
    byte(op::kEmptyTuple);
    byte(op::kReduce);
    if (!v2) global("torch", python_dtype);
    byte(op::kTuple);
    byte(op::kReduce);
    tensors.push_back(tensor);
  }

  std::string out_;
};

}  // namespace

std::string encode_torch_save_pickle(const c10::IValue& value, std::vector<at::Tensor>& tensors) {
  Pickler pickler;
  pickler.value(value, tensors, 0);
  return pickler.finish();
}

}  // namespace dcpp::tools
