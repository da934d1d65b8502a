// The pickle codec: the opcode writer, the restricted reader, and torch.save's data.pkl, checked
// against bytes PyTorch 2.6 wrote (the fixture, and pickles captured from `torch.save`).

#include "dcpp_test.h"

#include <cmath>

#include "format/metadata_pickle.h"
#include "format/pickle/pickle_reader.h"
#include "format/pickle/pickle_writer.h"
#include "format/pickle/torch_pickle.h"

#include <dcpp/core/checkpoint_error.h>
#include <dcpp/format/python_values.h>
#include <dcpp/state_dict/python_object.h>

#include <ATen/core/Dict.h>
#include <ATen/core/List.h>

#include <fstream>
#include <map>
#include <random>
#include <sstream>

using dcpp::CheckpointError;
using namespace dcpp::detail;

using dcpp::test::interop_output_dir;
using dcpp::test::read_file;
using dcpp::test::write_file;

namespace {

std::string hex(std::string_view bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out.push_back(digits[c >> 4]);
    out.push_back(digits[c & 15]);
  }
  return out;
}

std::string unhex(std::string_view text) {
  std::string out;
  for (std::size_t i = 0; i + 1 < text.size(); i += 2) {
    out.push_back(static_cast<char>(std::stoi(std::string(text.substr(i, 2)), nullptr, 16)));
  }
  return out;
}

/// The payload of record "<root>/data.pkl" of the torch.save zip in `item` (stored records; the
/// local header has zero sizes, so the payload runs to the data descriptor).
std::string data_pkl_of(std::string_view item) {
  std::size_t pos = 0;
  while ((pos = item.find("PK\x03\x04", pos)) != std::string_view::npos) {
    const auto u16 = [&](std::size_t at) {
      return static_cast<std::size_t>(static_cast<unsigned char>(item[at])) |
             static_cast<std::size_t>(static_cast<unsigned char>(item[at + 1])) << 8;
    };
    const std::size_t name_len = u16(pos + 26);
    const std::size_t extra_len = u16(pos + 28);
    const std::string_view name = item.substr(pos + 30, name_len);
    const std::size_t start = pos + 30 + name_len + extra_len;
    if (name.size() >= 9 && name.substr(name.size() - 9) == "/data.pkl") {
      const std::size_t end = item.find("PK\x07\x08", start);
      return std::string(item.substr(start, end - start));
    }
    pos = start;
  }
  FAIL("no data.pkl record");
  return {};
}

/// data.pkl of every item of the single_rank_mixed fixture, by flat key.
std::map<std::string, std::string> fixture_pickles() {
  const auto dir = dcpp::test::fixture("single_rank_mixed");
  const dcpp::Metadata metadata = decode_metadata(read_file(dir / ".metadata"), ".metadata");
  const std::string data = read_file(dir / "__0_0.distcp");
  std::map<std::string, std::string> pickles;
  for (const auto& [index, info] : metadata.storage_data) {
    pickles[index.fqn] = data_pkl_of(std::string_view(data).substr(info.offset, info.length));
  }
  return pickles;
}

at::Tensor no_tensor(const TensorRef&) { throw std::runtime_error("no tensor expected"); }

c10::IValue decode_plain(const std::string& pickle) {
  return decode_value_pickle(pickle, no_tensor, "test value");
}

std::string encode_plain(const c10::IValue& value) {
  std::vector<at::Tensor> tensors;
  std::string pickle = encode_value_pickle(value, tensors);
  REQUIRE(tensors.empty());
  return pickle;
}

/// Decodes `pickle` for every strict prefix and requires each to throw CheckpointError.
void require_every_prefix_throws(const std::string& pickle,
                                 const std::function<void(const std::string&)>& decode) {
  for (std::size_t n = 0; n < pickle.size(); ++n) {
    INFO("prefix of " << n << " bytes");
    REQUIRE_THROWS_AS(decode(pickle.substr(0, n)), CheckpointError);
  }
}

c10::IValue tuple(std::vector<c10::IValue> items) {
  return c10::IValue(c10::ivalue::Tuple::create(std::move(items)));
}

}  // namespace

TEST_CASE("PickleWriter picks Python's integer opcodes", "[pickle]") {
  // Expected bytes: data.pkl of torch.save(x) in PyTorch 2.6.
  const std::pair<int64_t, const char*> cases[] = {
      {7, "80024b072e"},
      {255, "80024bff2e"},
      {256, "80024d00012e"},
      {65536, "80024a000001002e"},
      {-5, "80024afbffffff2e"},
      {INT32_MIN, "80024a000000802e"},
      {int64_t{1} << 31, "80028a0500000080002e"},
      {int64_t{1} << 40, "80028a060000000000012e"},
      {INT64_MIN, "80028a0800000000000000802e"},
  };
  for (const auto& [value, expected] : cases) {
    INFO(value);
    const std::string pickle = encode_plain(c10::IValue(value));
    CHECK(hex(pickle) == expected);
    CHECK(decode_plain(pickle).toInt() == value);
  }
  for (int64_t value : {INT64_MAX, int64_t{-129}, int64_t{-(int64_t{1} << 40)}, int64_t{-256}}) {
    CHECK(decode_plain(encode_plain(c10::IValue(value))).toInt() == value);
  }
}

TEST_CASE("encode_value_pickle matches torch.save for plain values", "[pickle]") {
  // Expected bytes captured from PyTorch 2.6 (torch.save(x) -> archive/data.pkl).
  CHECK(hex(encode_plain(tuple({}))) == "8002292e");
  CHECK(hex(encode_plain(tuple({1, 2, 3, 4}))) == "8002284b014b024b034b047471002e");
  CHECK(hex(encode_plain(c10::IValue(c10::impl::GenericList(c10::AnyType::get())))) ==
        "80025d71002e");
  CHECK(hex(encode_plain(c10::IValue(c10::List<int64_t>({5})))) == "80025d71004b05612e");
  c10::Dict<std::string, int64_t> one;
  one.insert("k", 1);
  CHECK(hex(encode_plain(c10::IValue(one))) ==
        "80027d71005801000000"
        "6b71014b01732e");
  CHECK(hex(encode_plain(c10::IValue(c10::Dict<std::string, int64_t>()))) == "80027d71002e");
  CHECK(hex(encode_plain(c10::IValue(c10::complex<double>(1.0, 2.0)))) ==
        "8002635f5f6275696c74696e5f5f0a636f6d706c65780a7100473ff0000000000000474000000000000000"
        "867101527102"
        "2e");
  const std::string long_string(300, 'x');
  CHECK(encode_plain(c10::IValue(long_string)) ==
        unhex("8002582c010000") + long_string + unhex("71002e"));
}

TEST_CASE("encode_value_pickle matches torch.save for a dict holding tensors", "[pickle]") {
  // torch.save({'t': torch.ones(2), 'u': [torch.zeros(3, dtype=torch.int64)]}) in PyTorch 2.6.
  const std::string expected = unhex(
      "80027d710028580100000074710163746f7263682e5f7574696c730a5f72656275696c645f74656e736f725f76"
      "320a71022828580700000073746f72616765710363746f7263680a466c6f617453746f726167650a7104580100"
      "0000307105580300000063707571064b02747107514b004b028571084b018571098963636f6c6c656374696f6e"
      "730a4f726465726564446963740a710a2952710b74710c52710d580100000075710e5d710f6802282868036374"
      "6f7263680a4c6f6e6753746f726167650a7110580100000031711168064b03747112514b004b038571134b0185"
      "711489680a2952711574711652711761752e");
  c10::impl::GenericList u(c10::AnyType::get());
  u.push_back(at::zeros({3}, at::kLong));
  c10::impl::GenericDict dict(c10::StringType::get(), c10::AnyType::get());
  dict.insert("t", at::ones({2}));
  dict.insert("u", u);
  std::vector<at::Tensor> tensors;
  const std::string pickle = encode_value_pickle(c10::IValue(dict), tensors);
  CHECK(hex(pickle) == hex(expected));
  REQUIRE(tensors.size() == 2);
  CHECK(tensors[1].scalar_type() == at::kLong);

  // And back: tensors come from the loader, by storage key.
  const c10::IValue back = decode_value_pickle(
      pickle,
      [&](const TensorRef& ref) {
        CHECK(ref.storage_offset == 0);
        return tensors.at(std::stoul(ref.storage_key));
      },
      "dict item");
  const auto back_dict = back.toGenericDict();
  REQUIRE(back_dict.size() == 2);
  CHECK(dcpp::test::bitwise_equal(back_dict.at("t").toTensor(), at::ones({2})));
  CHECK(dcpp::test::bitwise_equal(back_dict.at("u").toListRef()[0].toTensor(),
                                  at::zeros({3}, at::kLong)));
}

TEST_CASE("bytes items of the fixture decode and re-encode bit-exactly", "[pickle]") {
  const auto pickles = fixture_pickles();
  const c10::IValue step = decode_plain(pickles.at("step"));
  CHECK(step.toInt() == 7);
  CHECK(decode_plain(pickles.at("lr")).toDouble() == 0.1);
  CHECK(decode_plain(pickles.at("name")).toStringRef() == "abc");
  CHECK(decode_plain(pickles.at("flag")).toBool() == true);
  const c10::IValue betas = decode_plain(pickles.at("betas"));
  REQUIRE(betas.isTuple());
  REQUIRE(betas.toTupleRef().elements().size() == 2);
  CHECK(betas.toTupleRef().elements()[0].toDouble() == 0.9);
  CHECK(betas.toTupleRef().elements()[1].toDouble() == 0.999);
  const c10::IValue history = decode_plain(pickles.at("history"));
  REQUIRE(history.isList());
  REQUIRE(history.toListRef().size() == 3);
  CHECK(history.toListRef()[2].toInt() == 3);

  for (const char* key : {"step", "lr", "name", "flag", "betas", "history"}) {
    INFO(key);
    CHECK(hex(encode_plain(decode_plain(pickles.at(key)))) == hex(pickles.at(key)));
  }
  // Typed lists and the tuple IValue write the same bytes as a generic list.
  CHECK(encode_plain(c10::IValue(c10::List<int64_t>({1, 2, 3}))) == pickles.at("history"));
  CHECK(encode_plain(tuple({0.9, 0.999})) == pickles.at("betas"));
}

TEST_CASE("tensor items of the fixture decode and re-encode bit-exactly", "[pickle]") {
  const auto pickles = fixture_pickles();
  struct Expect {
    const char* key;
    at::ScalarType dtype;
    std::vector<int64_t> sizes, strides;
    int64_t numel;
  };
  const Expect expects[] = {
      {"model.linear.weight", at::kFloat, {8, 4}, {4, 1}, 32},
      {"model.linear.bias", at::kFloat, {8}, {1}, 8},
      {"model.emb.weight", at::kBFloat16, {16, 8}, {8, 1}, 128},
      {"model.half", at::kHalf, {3, 5}, {5, 1}, 15},
      {"model.dbl", at::kDouble, {2, 2, 2}, {4, 2, 1}, 8},
      {"model.counts", at::kLong, {10}, {1}, 10},
      {"model.mask", at::kBool, {3}, {1}, 3},
      {"model.i8", at::kChar, {8}, {1}, 8},
      {"model.u8", at::kByte, {5}, {1}, 5},
      {"model.scalar", at::kFloat, {}, {}, 1},
      {"model.empty", at::kFloat, {0, 3}, {3, 1}, 0},
      {"noncontig", at::kFloat, {4, 3}, {1, 4}, 12},
  };
  for (const Expect& e : expects) {
    INFO(e.key);
    const std::string& pickle = pickles.at(e.key);
    const TensorRef ref = decode_tensor_pickle(pickle, e.key);
    CHECK(ref.storage_key == "0");
    CHECK(ref.dtype == e.dtype);
    CHECK(ref.sizes == e.sizes);
    CHECK(ref.strides == e.strides);
    CHECK(ref.storage_numel == e.numel);
    CHECK(ref.storage_offset == 0);
    CHECK_FALSE(ref.requires_grad);
    CHECK(hex(encode_tensor_pickle(ref)) == hex(pickle));
  }
  // A bytes item is not a tensor, and a tensor is a value.
  REQUIRE_THROWS_WITH(decode_tensor_pickle(pickles.at("step"), "key 'step'"),
                      Catch::Contains("key 'step'") && Catch::Contains("not a rebuilt tensor"));
  int calls = 0;
  const c10::IValue as_value = decode_value_pickle(
      pickles.at("noncontig"),
      [&](const TensorRef& ref) {
        ++calls;
        CHECK(ref.strides == std::vector<int64_t>{1, 4});
        return at::zeros({4, 3});
      },
      "noncontig");
  CHECK(calls == 1);
  CHECK(as_value.isTensor());
}

TEST_CASE("tensor pickles for every dtype, complex32 as torch.save writes it", "[pickle]") {
  // torch.save(torch.zeros(2, dtype=torch.complex32)) in PyTorch 2.6: _rebuild_tensor_v3 over an
  // UntypedStorage of 8 bytes, with the dtype as 7th argument.
  const std::string complex32 = unhex(
      "800263746f7263682e5f7574696c730a5f72656275696c645f74656e736f725f76330a71002828580700000073"
      "746f72616765710163746f7263682e73746f726167650a556e747970656453746f726167650a71025801000000"
      "307103580300000063707571044b08747105514b004b028571064b018571078963636f6c6c656374696f6e730a"
      "4f726465726564446963740a71082952710963746f7263680a636f6d706c657833320a710a74710b52710c2e");
  TensorRef ref;
  ref.storage_key = "0";
  ref.dtype = at::kComplexHalf;
  ref.storage_numel = 2;
  ref.sizes = {2};
  ref.strides = {1};
  CHECK(hex(encode_tensor_pickle(ref)) == hex(complex32));
  const TensorRef back = decode_tensor_pickle(complex32, "c32");
  CHECK(back.dtype == at::kComplexHalf);
  CHECK(back.storage_numel == 2);
  REQUIRE_THROWS_WITH(storage_class_name(at::kComplexHalf), Catch::Contains("ComplexHalf"));

  for (at::ScalarType dtype :
       {at::kFloat, at::kDouble, at::kHalf, at::kBFloat16, at::kLong, at::kInt, at::kShort,
        at::kChar, at::kByte, at::kBool, at::kComplexFloat, at::kComplexDouble}) {
    INFO(c10::toString(dtype));
    const std::string name = storage_class_name(dtype);
    CHECK(dtype_from_storage_class(name) == dtype);
    CHECK(dtype_from_python_name(python_dtype_name(dtype), "x") == dtype);
    TensorRef t;
    t.storage_key = "7";
    t.dtype = dtype;
    t.storage_numel = 100;
    t.storage_offset = 10;
    t.sizes = {3, 4, 5};
    t.strides = {20, 5, 1};
    t.requires_grad = true;
    const TensorRef u = decode_tensor_pickle(encode_tensor_pickle(t), "x");
    CHECK(u.storage_key == "7");
    CHECK(u.dtype == dtype);
    CHECK(u.storage_numel == 100);
    CHECK(u.storage_offset == 10);
    CHECK(u.sizes == t.sizes);
    CHECK(u.strides == t.strides);
    CHECK(u.requires_grad);
  }
  REQUIRE_THROWS_WITH(dtype_from_storage_class("QInt8Storage"), Catch::Contains("QInt8Storage"));
#ifdef DCPP_HAS_FLOAT8
  REQUIRE(dtype_from_python_name("float8_e5m2", "key 'w'") == at::ScalarType::Float8_e5m2);
#else
  REQUIRE_THROWS_WITH(dtype_from_python_name("float8_e5m2", "key 'w'"),
                      Catch::Contains("torch.float8_e5m2") && Catch::Contains("key 'w'"));
#endif
  REQUIRE_THROWS_WITH(dtype_from_python_name("bogus", "key 'w'"), Catch::Contains("torch.bogus"));
  REQUIRE_THROWS_AS(encode_tensor_pickle([] {
                      TensorRef q;
                      q.dtype = at::kQInt8;
                      return q;
                    }()),
                    CheckpointError);
}

TEST_CASE("a tensor view outside its storage is refused", "[pickle]") {
  TensorRef ref;
  ref.storage_key = "0";
  ref.storage_numel = 12;
  ref.sizes = {4, 3};
  ref.strides = {3, 1};
  CHECK_NOTHROW(decode_tensor_pickle(encode_tensor_pickle(ref), "ok"));
  ref.storage_offset = 1;
  REQUIRE_THROWS_WITH(decode_tensor_pickle(encode_tensor_pickle(ref), "key 'w'"),
                      Catch::Contains("key 'w'") && Catch::Contains("storage of 12"));
  ref.storage_offset = 0;
  ref.strides = {INT64_MAX / 2, 1};
  REQUIRE_THROWS_AS(decode_tensor_pickle(encode_tensor_pickle(ref), "w"), CheckpointError);
  ref.strides = {3};
  REQUIRE_THROWS_WITH(decode_tensor_pickle(encode_tensor_pickle(ref), "w"),
                      Catch::Contains("strides"));
  ref.strides = {3, 1};
  ref.storage_key = "../x";
  REQUIRE_THROWS_WITH(decode_tensor_pickle(encode_tensor_pickle(ref), "w"),
                      Catch::Contains("storage key"));
}

TEST_CASE("values round-trip through encode_value_pickle and decode_value_pickle", "[pickle]") {
  c10::impl::GenericDict inner(c10::IntType::get(), c10::AnyType::get());
  inner.insert(3, c10::IValue("three"));
  inner.insert(-1, c10::IValue());
  c10::impl::GenericList list(c10::AnyType::get());
  list.push_back(c10::IValue(1.5));
  list.push_back(c10::IValue(c10::List<double>({0.25, -2.0})));
  list.push_back(c10::IValue(c10::List<bool>({true, false})));
  list.push_back(c10::IValue(inner));
  list.push_back(tuple({c10::IValue(), c10::IValue(false), c10::IValue(int64_t{1} << 50)}));
  list.push_back(at::arange(6, at::kInt).reshape({2, 3}).t());  // non-contiguous: stored contiguous
  list.push_back(c10::IValue(c10::List<at::Tensor>({at::ones({1}, at::kBFloat16)})));
  c10::impl::GenericDict root(c10::StringType::get(), c10::AnyType::get());
  root.insert("list", list);
  root.insert("empty", c10::impl::GenericDict(c10::StringType::get(), c10::AnyType::get()));
  root.insert("nan", std::nan(""));
  root.insert("unicode", "gr\xc3\xbc\xc3\x9f");

  std::vector<at::Tensor> tensors;
  const std::string pickle = encode_value_pickle(c10::IValue(root), tensors);
  REQUIRE(tensors.size() == 2);
  const c10::IValue back = decode_value_pickle(
      pickle,
      [&](const TensorRef& ref) {
        const at::Tensor& t = tensors.at(std::stoul(ref.storage_key));
        CHECK(ref.storage_numel == t.numel());
        CHECK(ref.dtype == t.scalar_type());
        return t.contiguous().as_strided(ref.sizes, ref.strides, ref.storage_offset);
      },
      "value");
  const auto d = back.toGenericDict();
  REQUIRE(d.size() == 4);
  CHECK(d.keyType()->kind() == c10::TypeKind::StringType);
  const auto l = d.at("list").toListRef();
  REQUIRE(l.size() == 7);
  CHECK(l[0].toDouble() == 1.5);
  CHECK(l[1].toListRef()[1].toDouble() == -2.0);
  CHECK(l[2].toListRef()[0].toBool());
  const auto in = l[3].toGenericDict();
  CHECK(in.keyType()->kind() == c10::TypeKind::IntType);
  CHECK(in.at(3).toStringRef() == "three");
  CHECK(in.at(-1).isNone());
  const auto& t = l[4].toTupleRef().elements();
  CHECK(t[0].isNone());
  CHECK(t[1].toBool() == false);
  CHECK(t[2].toInt() == int64_t{1} << 50);
  CHECK(dcpp::test::bitwise_equal(l[5].toTensor(), at::arange(6, at::kInt).reshape({2, 3}).t()));
  CHECK(dcpp::test::bitwise_equal(l[6].toListRef()[0].toTensor(), at::ones({1}, at::kBFloat16)));
  CHECK(d.at("empty").toGenericDict().size() == 0);
  CHECK(std::isnan(d.at("nan").toDouble()));
  CHECK(d.at("unicode").toStringRef() == "gr\xc3\xbc\xc3\x9f");
  // Re-encoding what was decoded gives the same bytes.
  std::vector<at::Tensor> again;
  CHECK(encode_value_pickle(back, again) == pickle);
}

TEST_CASE("encode_value_pickle refuses what torch.save data cannot hold", "[pickle]") {
  c10::Dict<double, int64_t> float_keys;
  float_keys.insert(1.5, 1);
  std::vector<at::Tensor> tensors;
  REQUIRE_THROWS_WITH(encode_value_pickle(c10::IValue(float_keys), tensors),
                      Catch::Contains("float keys"));
  REQUIRE_THROWS_AS(encode_value_pickle(c10::IValue(at::Device("cpu")), tensors), CheckpointError);
}

TEST_CASE("the reader refuses foreign globals, naming them", "[pickle][hostile]") {
  // pickle.dumps(os.system, ('ls',)) style: GLOBAL 'os system', REDUCE.
  const std::string os_system = unhex("8002636f730a73797374656d0a71005802000000") + "ls" +
                                unhex(
                                    "710185710252710"
                                    "32e");
  REQUIRE_THROWS_WITH(decode_plain(os_system),
                      Catch::Contains("os.system") && Catch::Contains("test value"));
  REQUIRE_THROWS_WITH(decode_tensor_pickle(os_system, "file x, key 'w'"),
                      Catch::Contains("os.system") && Catch::Contains("key 'w'"));
  REQUIRE_THROWS_WITH(decode_metadata(os_system, "ckpt/.metadata"),
                      Catch::Contains("os.system") && Catch::Contains("ckpt/.metadata"));

  // A global tensor pickles name, as a value, is a value too: the global itself.
  PickleWriter storage(2);
  storage.put_global("torch", "FloatStorage");
  const c10::IValue global = decode_plain(storage.finish());
  REQUIRE(dcpp::python_object_of(global) != nullptr);
  CHECK(dcpp::python_object_of(global)->construction == dcpp::PythonConstruction::kGlobal);
  CHECK(dcpp::python_object_of(global)->class_name == "torch.FloatStorage");
}

TEST_CASE("the reader keeps a user class, a set and a call of any global as inert data",
          "[pickle]") {
  // A user class (NEWOBJ of __main__.Foo with a state) and a set, as protocol 4 writes them.
  PickleWriter foo(4);
  foo.put_global("__main__", "Foo");
  foo.empty_tuple();
  foo.newobj();
  foo.put_dict(1, [&](std::size_t) {
    foo.put_str("x");
    foo.put_int(3);
  });
  foo.build();
  const c10::IValue object = decode_value_pickle(foo.finish(), no_tensor, "key 'obj'");
  const dcpp::PythonObject* decoded = dcpp::python_object_of(object);
  REQUIRE(decoded != nullptr);
  CHECK(decoded->construction == dcpp::PythonConstruction::kNewObj);
  CHECK(decoded->module == "__main__");
  CHECK(decoded->name == "Foo");
  CHECK(decoded->arguments.empty());
  const auto attributes = dcpp::python_attributes_of(object);
  REQUIRE(attributes.has_value());
  REQUIRE(attributes->size() == 1);
  CHECK(attributes->at(0).first == "x");
  CHECK(attributes->at(0).second.toInt() == 3);

  PickleWriter set(4);
  set.put_global("builtins", "set");
  set.put_tuple(1, [&] {
    set.put_list(2, [&](std::size_t i) { set.put_int(static_cast<int64_t>(i) + 5); });
  });
  set.reduce();
  const auto items = dcpp::python_set_items(decode_value_pickle(set.finish(), no_tensor, "s"));
  REQUIRE(items.has_value());
  REQUIRE(items->size() == 2);
  CHECK(items->at(1).toInt() == 6);
  // EMPTY_SET (protocol 4) is an empty set.
  const auto empty = dcpp::python_set_items(decode_plain(unhex("80048f942e")));
  REQUIRE(empty.has_value());
  CHECK(empty->empty());
}

TEST_CASE("the reader refuses malformed pickles without crashing", "[pickle][hostile]") {
  const auto bad = [](const char* hex_bytes, const char* message) {
    INFO(hex_bytes);
    REQUIRE_THROWS_WITH(decode_plain(unhex(hex_bytes)),
                        Catch::Contains(message) && Catch::Contains("test value"));
  };
  bad("", "without STOP");
  bad("8002", "without STOP");
  bad("80024b01", "without STOP");
  bad("80022e", "STOP with 0 values");
  bad("80024b014b022e", "STOP with 2 values");
  bad("8002284b012e", "1 marks");
  bad("8002612e", "stack underflow");          // APPEND on nothing
  bad("80024b014b02612e", "APPEND on a int");  // APPEND to an int
  bad("8002284b01752e", "odd number");         // SETITEMS
  bad("80025d284b014b02752e", "SETITEMS on a list");
  bad("8002744b012e", "no MARK");          // TUPLE without MARK
  bad("80024b012885", "stack underflow");  // TUPLE1 across a MARK
  bad("80024b014b02622e", "BUILD on a int");
  bad("80024b014b0252", "REDUCE of a int");
  bad("8002490a2e", "unsupported opcode");  // INT (text protocol)
  bad("8002ff2e", "byte 2");
  bad("8006", "protocol 6");
  bad("800258ffffffff", "truncated");                    // BINUNICODE of 4 GiB
  bad("80048dffffffffffffff7f", "truncated");            // BINUNICODE8 of 2^63
  bad("80048effffffffffffffff", "truncated");            // BINBYTES8
  bad("800495ffffffffffffffff", "truncated");            // FRAME of 2^64-1
  bad("80028a09000000000000000001", "without STOP");     // LONG1 of 9 bytes, read
  bad("80028bffffff7f", "integer of 2147483647 bytes");  // LONG4 of 2^31-1 bytes
  bad("80028b01080000", "integer of 2049 bytes");        // one byte over the bound
  bad("80028b09000000", "truncated");
  bad("80028bffffffff2e", "negative");               // LONG4 negative length
  bad("80026a000000ff2e", "memo entry 4278190080");  // LONG_BINGET undefined
  bad("80026803", "memo entry 3");
  bad("8002710a2e", "stack underflow");  // BINPUT on nothing
  bad("800263746f7263680a466c6f617453746f72616765", "unterminated line");
  bad("80044b014b0293", "STACK_GLOBAL needs two str");
  // The memo is a dense table: an index no pickler writes (beyond the input's size) is refused
  // before anything is allocated for it; one within the size works.
  bad("8002284b0172ffffffff6affffffff742e", "memo index 4294967295 is beyond the pickle's size");
  const c10::IValue twice = decode_plain(unhex("8002284b0172090000006a09000000742e"));
  REQUIRE(twice.toTupleRef().elements().size() == 2);
  CHECK(twice.toTupleRef().elements()[1].toInt() == 1);
  // LONG1 limits: 8 bytes fit.
  CHECK(decode_plain(unhex("80028a08ffffffffffffff7f2e")).toInt() == INT64_MAX);
  CHECK(decode_plain(unhex("80028a00"
                           "2e"))
            .toInt() == 0);
}

TEST_CASE("truncation at every length throws CheckpointError", "[pickle][hostile]") {
  const auto pickles = fixture_pickles();
  for (const char* key : {"model.linear.weight", "model.scalar", "noncontig"}) {
    require_every_prefix_throws(pickles.at(key),
                                [&](const std::string& p) { decode_tensor_pickle(p, key); });
  }
  for (const char* key : {"step", "lr", "name", "flag", "betas", "history"}) {
    require_every_prefix_throws(pickles.at(key), [&](const std::string& p) { decode_plain(p); });
  }
}

TEST_CASE("cycles, deep nesting and shared subtrees are handled", "[pickle][hostile]") {
  // l = []; l.append(l)
  REQUIRE_THROWS_WITH(decode_plain(unhex("80025d7100680061"
                                         "2e")),
                      Catch::Contains("contains itself"));
  // 100000 nested lists: refused by depth, not by a stack overflow.
  std::string deep = unhex("8002");
  deep.append(100000, ']');
  deep.append(99999, 'a');
  deep.push_back('.');
  REQUIRE_THROWS_WITH(decode_plain(deep), Catch::Contains("deeper than 1000"));
  // t1 = ([], []) with one list; t(i+1) = (t(i), t(i)) for 60 levels: 2^60 paths, but each
  // node is converted once.
  PickleWriter w(2);
  w.put_tuple(2, [&] {
    w.put_list(0, [](std::size_t) {});
    w.put_memo(0);
  });
  for (uint32_t i = 1; i < 60; ++i) {
    w.put_tuple(2, [&] { w.put_memo(i); });  // the other item is t(i), already on the stack
  }
  const c10::IValue shared = decode_plain(w.finish());
  c10::IValue node = shared;
  for (int i = 0; i < 60; ++i) {
    REQUIRE(node.isTuple());
    REQUIRE(node.toTupleRef().elements().size() == 2);
    node = node.toTupleRef().elements()[1];
  }
  REQUIRE(node.isList());
  CHECK(node.toListRef().empty());
}

TEST_CASE("random corruption never crashes the decoders", "[pickle][hostile]") {
  const auto pickles = fixture_pickles();
  std::vector<std::string> seeds;
  for (const auto& [key, pickle] : pickles) seeds.push_back(pickle);
  std::mt19937 rng(1234);
  int refused = 0;
  for (int iteration = 0; iteration < 20000; ++iteration) {
    std::string p = seeds[rng() % seeds.size()];
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      const std::size_t at = rng() % p.size();
      switch (rng() % 3) {
        case 0:
          p[at] = static_cast<char>(rng());
          break;
        case 1:
          p.erase(at, 1 + rng() % 8);
          break;
        default:
          p.insert(at, 1, static_cast<char>(rng()));
      }
      if (p.empty()) p = "x";
    }
    try {
      decode_value_pickle(
          p, [](const TensorRef& ref) { return at::zeros({0}); }, "fuzz");
    } catch (const CheckpointError&) {
      ++refused;
    }
    try {
      decode_tensor_pickle(p, "fuzz");
    } catch (const CheckpointError&) {
      ++refused;
    }
  }
  CHECK(refused > 0);
}

TEST_CASE("write data.pkl pickles for the Python interop check", "[.interop]") {
  const auto dir = dcpp::test::interop_output_dir("pickle-interop") / "data_pkl";
  std::filesystem::create_directories(dir);
  const auto write = [&](const std::string& name, const std::string& bytes) {
    std::ofstream(dir / (name + ".pkl"), std::ios::binary) << bytes;
  };
  const auto write_value = [&](const std::string& name, const c10::IValue& value) {
    std::vector<at::Tensor> tensors;
    write(name, encode_value_pickle(value, tensors));
    for (std::size_t i = 0; i < tensors.size(); ++i) {
      const at::Tensor t = tensors[i].contiguous();
      std::ofstream(dir / (name + "." + std::to_string(i) + ".bin"), std::ios::binary)
          .write(static_cast<const char*>(t.data_ptr()), t.numel() * t.element_size());
    }
  };
  write_value("int", c10::IValue(7));
  // Megatron-Core's Python objects (python_object.h): numpy arrays (every byte value; an unsigned
  // dtype torch lacks) and an argparse.Namespace.
  c10::impl::GenericDict objects(c10::StringType::get(), c10::AnyType::get());
  objects.insert("bytes",
                 dcpp::numpy_array_value(at::arange(256).to(at::kByte).reshape({16, 16}), "|u1"));
  objects.insert("key", dcpp::numpy_array_value(at::tensor({-1, 7}, at::kInt), "<u4"));
  objects.insert("halves",
                 dcpp::numpy_array_value(at::tensor({1.5, -2.25, 65504.0}).to(at::kHalf), "<f2"));
  objects.insert("args", dcpp::python_object_value("argparse.Namespace",
                                                   {{"hidden", int64_t{8}}, {"name", "tiny"}}));
  write_value("python_objects", c10::IValue(objects));
  // Every other kind of Python value a common state holds (python_values.h), written as CPython
  // pickles it: check_pickles.py compares them with torch.save's bytes and loads them.
  using dcpp::PythonConstruction;
  c10::impl::GenericDict kinds(c10::StringType::get(), c10::AnyType::get());
  kinds.insert("set", dcpp::python_set_value({int64_t{1}, int64_t{2}, int64_t{3}}));
  kinds.insert("frozenset", dcpp::python_set_value({int64_t{4}}, true));
  kinds.insert("bytes", dcpp::python_bytes_value(std::string("\x00\x7f\x80\xff", 4)));
  kinds.insert("empty_bytes", dcpp::python_bytes_value(""));
  kinds.insert("big", dcpp::python_int_value("1180591620717411303424"));
  kinds.insert("negative_big", dcpp::python_int_value("-1267650600228229401496703205376"));
  kinds.insert(
      "per_bucket_numel",
      dcpp::python_dict_value(
          {{tuple({dcpp::torch_dtype_value(at::kBFloat16), dcpp::torch_dtype_value(at::kFloat)}),
            c10::IValue(c10::List<int64_t>({64, 40}))}}));
  kinds.insert("mixed_keys", dcpp::python_dict_value({{int64_t{1}, "one"}, {"two", int64_t{2}}}));
  kinds.insert("params_dtype", dcpp::torch_dtype_value(at::kBFloat16));
  kinds.insert("size", dcpp::python_call_value(PythonConstruction::kReduce, "torch", "Size",
                                               {tuple({int64_t{4}, int64_t{8}})}));
  kinds.insert("signal", dcpp::python_call_value(PythonConstruction::kReduce, "signal", "Signals",
                                                 {int64_t{15}}));
  kinds.insert("nan", std::nan(""));
  write_value("python_values", c10::IValue(kinds));
  // pathlib.PosixPath('/tmp/x') as Python 3.11 pickles it (3.13 names pathlib._local and one
  // argument): read by every Python, so not compared with torch.save's bytes.
  write_value("python_path", dcpp::python_call_value(PythonConstruction::kReduce, "pathlib",
                                                     "PosixPath", {"/", "tmp", "x"}));
  write_value("big_int", c10::IValue(int64_t{-(int64_t{1} << 62)}));
  write_value("float", c10::IValue(0.1));
  write_value("str", c10::IValue("abc"));
  write_value("bool", c10::IValue(true));
  write_value("none", c10::IValue());
  write_value("complex", c10::IValue(c10::complex<double>(1.0, -2.5)));
  write_value("betas", tuple({0.9, 0.999}));
  write_value("tuple4", tuple({1, 2, 3, 4}));
  write_value("list", c10::IValue(c10::List<int64_t>({1, 2, 3})));
  c10::impl::GenericDict str_keys(c10::StringType::get(), c10::AnyType::get());
  c10::impl::GenericList mixed(c10::AnyType::get());
  mixed.push_back(1.5);
  mixed.push_back(c10::IValue());
  str_keys.insert("a", 1);
  str_keys.insert("b", mixed);
  write_value("dict", c10::IValue(str_keys));
  c10::impl::GenericDict int_keys(c10::IntType::get(), c10::AnyType::get());
  int_keys.insert(3, "x");
  int_keys.insert(-1, c10::IValue());
  write_value("int_dict", c10::IValue(int_keys));
  c10::impl::GenericList u(c10::AnyType::get());
  u.push_back(at::zeros({3}, at::kLong));
  c10::impl::GenericDict tensors(c10::StringType::get(), c10::AnyType::get());
  tensors.insert("t", at::ones({2}));
  tensors.insert("u", u);
  write_value("tensors", c10::IValue(tensors));
  c10::impl::GenericList long_list(c10::AnyType::get());
  for (int i = 0; i < 2500; ++i) long_list.push_back(c10::IValue(std::to_string(i)));
  write_value("long_list", c10::IValue(long_list));

  // Tensor rebuild pickles, as torch.save(tensor) writes them.
  const auto write_tensor = [&](const std::string& name, at::ScalarType dtype, int64_t numel,
                                int64_t offset, std::vector<int64_t> sizes,
                                std::vector<int64_t> strides, bool requires_grad) {
    TensorRef ref;
    ref.storage_key = "0";
    ref.dtype = dtype;
    ref.storage_numel = numel;
    ref.storage_offset = offset;
    ref.sizes = std::move(sizes);
    ref.strides = std::move(strides);
    ref.requires_grad = requires_grad;
    write(name, encode_tensor_pickle(ref));
  };
  write_tensor("t_float_8x4", at::kFloat, 32, 0, {8, 4}, {4, 1}, false);
  write_tensor("t_bf16_16x8", at::kBFloat16, 128, 0, {16, 8}, {8, 1}, false);
  write_tensor("t_bool_3", at::kBool, 3, 0, {3}, {1}, false);
  write_tensor("t_scalar", at::kFloat, 1, 0, {}, {}, false);
  write_tensor("t_empty_0x3", at::kFloat, 0, 0, {0, 3}, {3, 1}, false);
  write_tensor("t_noncontig", at::kFloat, 12, 0, {4, 3}, {1, 4}, false);
  write_tensor("t_offset_row", at::kDouble, 12, 4, {4}, {1}, false);
  write_tensor("t_requires_grad", at::kFloat, 2, 0, {2}, {1}, true);
  write_tensor("t_complex32", at::kComplexHalf, 2, 0, {2}, {1}, false);
  write_tensor("t_complex64", at::kComplexFloat, 2, 0, {2}, {1}, false);
  write_tensor("t_int16", at::kShort, 300, 0, {300}, {1}, false);
}

TEST_CASE("an OrderedDict with attributes (a module's state_dict) reads as its items") {
  // pickle.dumps(d, protocol=2) of OrderedDict(a=1) with d._metadata = OrderedDict(), by Python.
  const c10::IValue value = decode_plain(unhex(
      "800263636f6c6c656374696f6e730a4f726465726564446963740a71002952710158010000006171024b01737d"
      "710358090000005f6d65746164617461710468002952710573622e"));
  const auto dict = value.toGenericDict();
  REQUIRE(dict.size() == 1);
  CHECK(dict.at(c10::IValue(std::string("a"))).toInt() == 1);
}
