// Every kind of Python value a real checkpoint's pickles hold (docs/megatron.md, "Values"): read as
// inert data from what CPython's pickle writes (protocol 2, as torch.save), given by the typed
// accessors, and written back byte for byte.

#include "dcpp_test.h"

#include "format/pickle/torch_pickle.h"

#include <dcpp/core/checkpoint_error.h>
#include <dcpp/format/python_values.h>
#include <dcpp/state_dict/python_object.h>

#include <ATen/ATen.h>
#include <ATen/core/Dict.h>
#include <ATen/core/List.h>

#include <cmath>
#include <cstring>

using dcpp::PythonConstruction;
using dcpp::detail::decode_value_pickle;
using dcpp::detail::encode_value_pickle;
using dcpp::detail::TensorRef;

namespace {

std::string from_hex(std::string_view text) {
  std::string out;
  for (std::size_t i = 0; i + 1 < text.size(); i += 2) {
    out.push_back(static_cast<char>(std::stoi(std::string(text.substr(i, 2)), nullptr, 16)));
  }
  return out;
}

at::Tensor refuse_storage(const TensorRef&) { throw std::runtime_error("no tensor expected"); }

/// What CPython 3 writes for `pickle.dumps(value, protocol=2)`, decoded; and re-encoded by dcpp,
/// the same bytes.
c10::IValue python_made(std::string_view hex) {
  const std::string pickle = from_hex(hex);
  c10::IValue value = decode_value_pickle(pickle, refuse_storage, "python value");
  std::vector<at::Tensor> tensors;
  CHECK(encode_value_pickle(value, tensors) == pickle);
  return value;
}

const dcpp::PythonObject& object_of(const c10::IValue& value) {
  const dcpp::PythonObject* object = dcpp::python_object_of(value);
  REQUIRE(object != nullptr);
  return *object;
}

}  // namespace

TEST_CASE("sets, bytes, big ints and dicts of any keys read as Python wrote them") {
  // {1, 2, 3}
  const auto set = dcpp::python_set_items(python_made(
      "8002635f5f6275696c74696e5f5f0a7365740a71005d7101284b014b024b03658571025271032e"));
  REQUIRE(set.has_value());
  REQUIRE(set->size() == 3);
  CHECK(set->at(2).toInt() == 3);
  // frozenset({'a'})
  const c10::IValue frozen = python_made(
      "8002635f5f6275696c74696e5f5f0a66726f7a656e7365740a71005d71015801000000617102618571035271042"
      "e");
  CHECK(object_of(frozen).class_name == dcpp::kFrozenSetClass);
  CHECK(dcpp::python_set_items(frozen)->at(0).toStringRef() == "a");
  // b'\x00\x7f\x80\xff' (protocol 2: _codecs.encode(latin1 str, 'latin1')) and b''
  CHECK(dcpp::python_bytes_of(python_made("8002635f636f646563730a656e636f64650a71005806000000007fc2"
                                          "80c3bf710158060000006c6174696e3171028671035271042e")) ==
        std::string("\x00\x7f\x80\xff", 4));
  CHECK(dcpp::python_bytes_of(python_made(
            "8002635f5f6275696c74696e5f5f0a62797465730a7100295271012e")) == std::string());
  // 2**70 and -2**100
  CHECK(dcpp::python_int_digits(python_made("80028a090000000000000000402e")) ==
        "1180591620717411303424");
  CHECK(dcpp::python_int_digits(python_made("80028a0d000000000000000000000000f02e")) ==
        "-1267650600228229401496703205376");
  // {(1, 2): [3], (4, 5): [6]}
  const auto tuple_keys = dcpp::python_dict_items(
      python_made("80027d7100284b014b028671015d71024b03614b044b058671035d71044b0661752e"));
  REQUIRE(tuple_keys.has_value());
  REQUIRE(tuple_keys->size() == 2);
  CHECK(tuple_keys->at(1).first.toTupleRef().elements()[0].toInt() == 4);
  CHECK(tuple_keys->at(1).second.toListRef()[0].toInt() == 6);
  // {1: 'one', 'two': 2}
  const auto mixed = dcpp::python_dict_items(
      python_made("80027d7100284b0158030000006f6e657101580300000074776f71024b02752e"));
  REQUIRE(mixed.has_value());
  CHECK(mixed->at(0).first.toInt() == 1);
  CHECK(mixed->at(1).first.toStringRef() == "two");
}

TEST_CASE("enums, paths, namespaces and plain objects read as the calls their pickles describe") {
  // signal.SIGTERM: Signals(15)
  const c10::IValue signal =
      python_made("8002637369676e616c0a5369676e616c730a71004b0f8571015271022e");
  CHECK(object_of(signal).construction == PythonConstruction::kReduce);
  CHECK(object_of(signal).class_name == "signal.Signals");
  CHECK(dcpp::python_enum_value_of(signal)->toInt() == 15);
  // pathlib.PosixPath('/tmp/x'): PosixPath('/', 'tmp', 'x')
  const c10::IValue path = python_made(
      "800263706174686c69620a506f736978506174680a710058010000002f71015803000000746d70710258010000"
      "007871038771045271052e");
  CHECK(object_of(path).arguments.size() == 3);
  CHECK(object_of(path).arguments[1].toStringRef() == "tmp");
  // types.SimpleNamespace(a=1, b='x')
  const auto attributes = dcpp::python_attributes_of(python_made(
      "80026374797065730a53696d706c654e616d6573706163650a7100295271017d710228580100000061710"
      "34b015801000000627104580100000078710575622e"));
  REQUIRE(attributes.has_value());
  REQUIRE(attributes->size() == 2);
  CHECK(attributes->at(1).first == "b");
  CHECK(attributes->at(1).second.toStringRef() == "x");
  // io.BytesIO(b'abc'): NEWOBJ of _io.BytesIO, the state (b'abc', 0, None)
  const c10::IValue stream = python_made(
      "8002635f696f0a4279746573494f0a710029817101635f636f646563730a656e636f64650a7102580300000061"
      "6263710358060000006c6174696e3171048671055271064b004e877107622e");
  CHECK(object_of(stream).construction == PythonConstruction::kNewObj);
  REQUIRE(object_of(stream).state.has_value());
  CHECK(dcpp::python_bytes_of(object_of(stream).state->toTupleRef().elements()[0]) == "abc");
}

TEST_CASE("a dict subclass keeps the items its pickle sets on it") {
  // collections.defaultdict(int, {'a': 1, 'b': 2}): REDUCE defaultdict(int), then SETITEMS on it.
  const c10::IValue value = python_made(
      "800263636f6c6c656374696f6e730a64656661756c74646963740a7100635f5f6275696c74696e5f5f0a6c6f6e"
      "670a71018571025271032858010000006171044b0158010000006271054b02752e");
  const dcpp::PythonObject& object = object_of(value);
  CHECK(object.class_name == "collections.defaultdict");
  REQUIRE(object.arguments.size() == 1);
  CHECK(object_of(object.arguments[0]).class_name == "__builtin__.long");
  REQUIRE(object.dict_items.size() == 2);
  CHECK(object.dict_items[1].first.toStringRef() == "b");
  CHECK(object.dict_items[1].second.toInt() == 2);
  CHECK(object.list_items.empty());
}

TEST_CASE("floats keep their bits: NaN, infinities and -0.0 are told apart") {
  const c10::IValue nan = python_made("8002477ff80000000000002e");
  const c10::IValue inf = python_made("8002477ff00000000000002e");
  const c10::IValue negative_zero = python_made("80024780000000000000002e");
  CHECK(std::isnan(nan.toDouble()));
  CHECK(dcpp::identical_values(nan, c10::IValue(std::nan(""))));
  CHECK_FALSE(dcpp::identical_values(nan, inf));
  CHECK_FALSE(dcpp::identical_values(negative_zero, c10::IValue(0.0)));
  CHECK(dcpp::identical_values(negative_zero, c10::IValue(-0.0)));
}

TEST_CASE("torch dtypes, sizes and numpy scalars have typed accessors and write back exactly") {
  const auto round_trip = [](const c10::IValue& value) {
    std::vector<at::Tensor> tensors;
    const std::string pickle = encode_value_pickle(value, tensors);
    const c10::IValue back = decode_value_pickle(pickle, refuse_storage, "value");
    CHECK(dcpp::identical_values(back, value));
    std::vector<at::Tensor> again;
    CHECK(encode_value_pickle(back, again) == pickle);
    return back;
  };
  const c10::IValue dtype = round_trip(dcpp::torch_dtype_value(at::kBFloat16));
  CHECK(dcpp::torch_dtype_of(dtype) == at::kBFloat16);
  CHECK(object_of(dtype).class_name == "torch.bfloat16");
  // A dtype this libtorch may lack keeps its name.
  const c10::IValue e8m0 = round_trip(dcpp::python_global_value("torch", "float8_e8m0fnu"));
  CHECK(object_of(e8m0).name == "float8_e8m0fnu");

  const c10::IValue size = round_trip(dcpp::python_call_value(
      PythonConstruction::kReduce, "torch", "Size",
      {c10::ivalue::Tuple::create({c10::IValue(int64_t{4}), c10::IValue(int64_t{8})})}));
  CHECK(dcpp::torch_size_of(size) == std::vector<int64_t>{4, 8});

  // numpy.float64(1.5) as numpy 2 pickles it: scalar(dtype('f8'), 8 bytes).
  double value = 1.5;
  std::string bits(sizeof value, '\0');
  std::memcpy(bits.data(), &value, sizeof value);
  const c10::IValue f8 = dcpp::python_call_value(
      PythonConstruction::kReduce, "numpy", "dtype",
      {c10::IValue("f8"), c10::IValue(false), c10::IValue(true)},
      c10::ivalue::Tuple::create({c10::IValue(int64_t{3}), c10::IValue("<"), c10::IValue(),
                                  c10::IValue(), c10::IValue(), c10::IValue(int64_t{-1}),
                                  c10::IValue(int64_t{-1}), c10::IValue(int64_t{0})}));
  const c10::IValue scalar =
      round_trip(dcpp::python_call_value(PythonConstruction::kReduce, "numpy._core.multiarray",
                                         "scalar", {f8, dcpp::python_bytes_value(bits)}));
  const auto numpy = dcpp::numpy_array_of(scalar);
  REQUIRE(numpy.has_value());
  CHECK(numpy->dtype == "<f8");
  CHECK(numpy->array.dim() == 0);
  CHECK(numpy->array.item<double>() == 1.5);
}

TEST_CASE("big ints at the bounds, and decimal digits, convert exactly") {
  for (const std::string digits :
       {"9223372036854775807", "-9223372036854775808", "9223372036854775808",
        "-9223372036854775809", "18446744073709551616", "-340282366920938463463374607431768211456",
        "255", "-129"}) {
    INFO(digits);
    const c10::IValue value = dcpp::python_int_value(digits);
    CHECK(dcpp::python_int_digits(value) == digits);
    std::vector<at::Tensor> tensors;
    const c10::IValue back =
        decode_value_pickle(encode_value_pickle(value, tensors), refuse_storage, "value");
    CHECK(dcpp::python_int_digits(back) == digits);
  }
  CHECK(dcpp::python_int_value("9223372036854775807").isInt());
  CHECK_FALSE(dcpp::python_int_value("9223372036854775808").isInt());
  CHECK(dcpp::python_int_digits(dcpp::python_int_value("-0007")) == "-7");
  CHECK_THROWS_AS(dcpp::python_int_value("12a"), dcpp::CheckpointError);
  CHECK_THROWS_AS(dcpp::python_int_value(std::string(6000, '9')), dcpp::CheckpointError);
}

TEST_CASE("a storage outside a tensor dcpp rebuilds is a value dcpp cannot represent") {
  // A bare persistent id: what a quantized tensor's rebuild call would hold.
  const std::string pickle = from_hex("8002580100000073512e");
  try {
    decode_value_pickle(pickle, refuse_storage, "key 'q'");
    FAIL("decoded");
  } catch (const dcpp::CheckpointError& error) {
    CHECK(error.kind() == dcpp::ErrorKind::kIncompatible);
    CHECK_THAT(error.what(), Catch::Contains("key 'q'") && Catch::Contains("persistent id"));
  }
}
