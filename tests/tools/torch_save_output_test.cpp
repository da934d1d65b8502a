// `dcpp convert --to torch-save` writes a file every supported libtorch's own `torch::pickle_load`
// reads (the suite runs against libtorch 1.13, 2.6 and 2.14): nested dicts, lists of one and of
// several elements, ints of every width, floats, bools, None, strings, complex numbers, tuples and
// tensors, all read back bit for bit.

#include "dcpp_test.h"
#include "tools_test_util.h"

#include "convert/convert_command.h"

#include <dcpp/checkpoint/checkpointer.h>

#include <torch/csrc/jit/serialization/pickle.h>

#include <cstdint>
#include <cstring>
#include <limits>

namespace {

namespace fs = std::filesystem;

c10::IValue pickle_load_file(const fs::path& file) {
  const std::string bytes = dcpp::test::read_file(file);
  return torch::jit::pickle_load(std::vector<char>(bytes.begin(), bytes.end()));
}

uint64_t bits_of(double value) {
  uint64_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}

// `loaded` (libtorch's reading) is `expected` exactly: same kinds, floats with the same bits.
void require_same_value(const c10::IValue& loaded, const c10::IValue& expected,
                        const std::string& where) {
  INFO(where << ": loaded " << loaded.tagKind() << ", expected " << expected.tagKind());
  if (expected.isDouble()) {
    REQUIRE(loaded.isDouble());
    REQUIRE(bits_of(loaded.toDouble()) == bits_of(expected.toDouble()));
  } else if (expected.isInt()) {
    REQUIRE(loaded.isInt());
    REQUIRE(loaded.toInt() == expected.toInt());
  } else if (expected.isBool()) {
    REQUIRE(loaded.isBool());
    REQUIRE(loaded.toBool() == expected.toBool());
  } else if (expected.isNone()) {
    REQUIRE(loaded.isNone());
  } else if (expected.isString()) {
    REQUIRE(loaded.isString());
    REQUIRE(loaded.toStringRef() == expected.toStringRef());
  } else if (expected.isComplexDouble()) {
    REQUIRE(loaded.isComplexDouble());
    REQUIRE(bits_of(loaded.toComplexDouble().real()) == bits_of(expected.toComplexDouble().real()));
    REQUIRE(bits_of(loaded.toComplexDouble().imag()) == bits_of(expected.toComplexDouble().imag()));
  } else if (expected.isTuple()) {
    REQUIRE(loaded.isTuple());
    const auto& a = loaded.toTupleRef().elements();
    const auto& b = expected.toTupleRef().elements();
    REQUIRE(a.size() == b.size());
    for (std::size_t i = 0; i < a.size(); ++i) {
      require_same_value(a[i], b[i], where + "." + std::to_string(i));
    }
  } else if (expected.isList()) {
    REQUIRE(loaded.isList());
    const auto a = loaded.toListRef();
    const auto b = expected.toListRef();
    REQUIRE(a.size() == b.size());
    for (std::size_t i = 0; i < a.size(); ++i) {
      require_same_value(a[i], b[i], where + "." + std::to_string(i));
    }
  } else {
    FAIL("unexpected value kind " << expected.tagKind());
  }
}

// `loaded` is the nested state dict `expected`: dicts (keys in order), lists, tensors bit for bit,
// values exactly. Returns the number of leaves compared.
std::size_t require_same_tree(const c10::IValue& loaded, const dcpp::StateValue& expected,
                              const std::string& where) {
  INFO(where);
  switch (expected.kind()) {
    case dcpp::StateValue::Kind::kDict: {
      REQUIRE(loaded.isGenericDict());
      const c10::impl::GenericDict dict = loaded.toGenericDict();
      REQUIRE(dict.size() == expected.dict().size());
      std::size_t leaves = 0;
      auto next = dict.begin();
      for (const auto& item : expected.dict()) {
        REQUIRE(next->key().toStringRef() == item.key);
        leaves += require_same_tree(next->value(), item.value, where + "." + item.key);
        ++next;
      }
      return leaves;
    }
    case dcpp::StateValue::Kind::kList: {
      REQUIRE(loaded.isList());
      const auto list = loaded.toListRef();
      REQUIRE(list.size() == expected.list().size());
      std::size_t leaves = 0;
      for (std::size_t i = 0; i < list.size(); ++i) {
        leaves += require_same_tree(list[i], expected.list()[i], where + "." + std::to_string(i));
      }
      return leaves;
    }
    case dcpp::StateValue::Kind::kTensor:
      REQUIRE(loaded.isTensor());
      REQUIRE(dcpp::test::bitwise_equal(loaded.toTensor(), expected.tensor()));
      return 1;
    case dcpp::StateValue::Kind::kValue:
      require_same_value(loaded, expected.value(), where);
      return 1;
    default:
      FAIL("unexpected state value " << expected.kind_name() << " at " << where);
      return 0;
  }
}

dcpp::tools::ConvertOptions to_torch_save() {
  dcpp::tools::ConvertOptions options;
  options.to = dcpp::tools::TargetFormat::kTorchSave;
  options.progress = false;
  return options;
}

}  // namespace

TEST_CASE("libtorch's pickle_load reads the torch-save output of an optimizer checkpoint") {
  // PyTorch's Adam checkpoint: nested dicts, a list of one param group, a list of four params,
  // floats, bools, None, strings, 0-dim float step tensors.
  dcpp::test::TempDir dir;
  const fs::path src = dcpp::test::fixture("model_optim_adam");
  dcpp::tools::convert_checkpoint(src, dir / "adam.pt", to_torch_save());
  const c10::IValue loaded = pickle_load_file(dir / "adam.pt");
  const dcpp::StateDict expected = dcpp::load_from_keys(src);
  const std::size_t leaves = require_same_tree(loaded, dcpp::StateValue(expected), "");
  REQUIRE(leaves >= 25);
  const c10::IValue groups = loaded.toGenericDict().at("optim").toGenericDict().at("param_groups");
  REQUIRE(groups.toListRef().size() == 1);  // a one-element list: no APPEND, which libtorch lacks
}

TEST_CASE("libtorch's pickle_load reads every kind of value of the torch-save output exactly") {
  dcpp::test::TempDir dir;
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  dcpp::StateDict state;
  // Every width of pickle int: 1, 2 and 4 bytes, and wider (negative ones too).
  c10::impl::GenericList ints(c10::AnyType::get());
  for (int64_t v : {int64_t{0}, int64_t{255}, int64_t{256}, int64_t{65535}, int64_t{65536},
                    int64_t{-1}, int64_t{-129}, int64_t{2147483647}, int64_t{2147483648},
                    int64_t{-2147483648}, int64_t{-2147483649}, int64_t{1} << 40, kMax, kMin}) {
    ints.push_back(v);
  }
  state.insert("ints", c10::IValue(ints));
  c10::impl::GenericList floats(c10::AnyType::get());
  for (double v : {0.0, -0.0, 1e-300, -2.5, std::numeric_limits<double>::infinity(),
                   std::numeric_limits<double>::quiet_NaN(), 0.1}) {
    floats.push_back(v);
  }
  state.insert("floats", c10::IValue(floats));
  c10::impl::GenericList one(c10::AnyType::get());
  one.push_back(c10::IValue(std::string("only")));
  state.insert("one", c10::IValue(one));
  state.insert("empty", c10::IValue(c10::impl::GenericList(c10::AnyType::get())));
  state.insert("tuple5", c10::IValue(c10::ivalue::Tuple::create(
                             {c10::IValue(1), c10::IValue(2.0), c10::IValue(true), c10::IValue(),
                              c10::IValue(std::string("f\xc3\xbcnf"))})));
  state.insert("pair",
               c10::IValue(c10::ivalue::Tuple::create({c10::IValue(0.9), c10::IValue(0.999)})));
  state.insert("z", c10::IValue(c10::complex<double>(1.5, -0.25)));
  state.insert("flag", c10::IValue(false));
  state.insert("nothing", c10::IValue());
  state.insert("long_text", c10::IValue(std::string(300, 'x')));
  dcpp::StateList layers;
  layers.push_back(at::arange(6, at::kFloat).view({2, 3}));
  state.insert("layers", layers);
  dcpp::StateDict inner;
  inner.insert("bf16", at::full({3}, 1.5, at::kBFloat16));
  inner.insert("mask", at::tensor({1, 0}, at::kInt).to(at::kBool));
  inner.insert("count", at::tensor(int64_t{kMax}));
  dcpp::StateList groups;
  groups.push_back(inner);
  state.insert("groups", groups);
  dcpp::save(state, dir / "ckpt");

  dcpp::tools::convert_checkpoint(dir / "ckpt", dir / "all.pt", to_torch_save());
  const c10::IValue loaded = pickle_load_file(dir / "all.pt");
  const dcpp::StateDict expected = dcpp::load_from_keys(dir / "ckpt");
  REQUIRE(require_same_tree(loaded, dcpp::StateValue(expected), "") == 32);
}
