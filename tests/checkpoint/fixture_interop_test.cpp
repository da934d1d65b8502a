// PyTorch wrote these checkpoints (tests/fixtures/pytorch-2.6 and pytorch-2.14, made by
// ../shared/tools/pytorch-ref/make_fixtures.py and make_fixtures_new.py); every value must read
// back as its manifest says.

#include "dcpp_test.h"

#include <dcpp/checkpoint/checkpointer.h>
#include <dcpp/core/checkpoint_error.h>

#include <nlohmann/json.hpp>

#include <fstream>

using dcpp::StateDict;
using dcpp::StateValue;
using nlohmann::json;

namespace {

json manifest(const std::string& name, const std::string& version = "2.6") {
  std::ifstream in(dcpp::test::fixture(name + ".manifest.json", version));
  REQUIRE(in.good());
  return json::parse(in);
}

std::string dtype_name(at::ScalarType dtype) {
  switch (dtype) {
    case at::kFloat:
      return "float32";
    case at::kDouble:
      return "float64";
    case at::kHalf:
      return "float16";
    case at::kBFloat16:
      return "bfloat16";
    case at::kLong:
      return "int64";
    case at::kInt:
      return "int32";
    case at::kShort:
      return "int16";
    case at::kChar:
      return "int8";
    case at::kByte:
      return "uint8";
    case at::kBool:
      return "bool";
    default:
      return c10::toString(dtype);
  }
}

void check_tensor(const std::string& where, const at::Tensor& tensor, const json& expected) {
  INFO(where);
  REQUIRE(dtype_name(tensor.scalar_type()) == expected["dtype"].get<std::string>());
  REQUIRE(tensor.sizes().vec() == expected["shape"].get<std::vector<int64_t>>());
  const at::Tensor as_double = tensor.to(at::kDouble);
  REQUIRE(as_double.sum().item<double>() ==
          Approx(expected["sum"].get<double>()).epsilon(1e-12).margin(1e-12));
  REQUIRE(as_double.abs().sum().item<double>() ==
          Approx(expected["abs_sum"].get<double>()).epsilon(1e-12).margin(1e-12));
  if (!expected.contains("first")) {
    return;  // the 2.14 manifests of the newer variants give sums only
  }
  const at::Tensor flat = as_double.reshape({-1});
  const auto first = expected["first"].get<std::vector<double>>();
  for (std::size_t i = 0; i < first.size(); ++i) {
    REQUIRE(flat[static_cast<int64_t>(i)].item<double>() == first[i]);  // exact: same bits
  }
}

void check_ivalue(const std::string& where, const c10::IValue& value, const json& expected);

void check_value(const std::string& where, const StateValue& value, const json& expected) {
  INFO(where);
  const std::string type = expected["type"];
  if (type == "tensor") {
    REQUIRE(value.is_tensor());
    check_tensor(where, value.tensor(), expected);
  } else if (type == "dict") {
    REQUIRE(value.is_dict());
    REQUIRE(value.dict().size() == expected["items"].size());
    for (const auto& [key, item] : expected["items"].items()) {
      REQUIRE(value.dict().contains(key));
      check_value(where + "/" + key, value.dict().at(key), item);
    }
  } else if (type == "list") {
    REQUIRE(value.is_list());
    REQUIRE(value.list().size() == expected["items"].size());
    for (std::size_t i = 0; i < value.list().size(); ++i) {
      check_value(where + "/" + std::to_string(i), value.list()[i], expected["items"][i]);
    }
  } else {
    REQUIRE(value.is_value());
    check_ivalue(where, value.value(), expected);
  }
}

void check_ivalue(const std::string& where, const c10::IValue& value, const json& expected) {
  INFO(where);
  const std::string type = expected["type"];
  if (type == "NoneType") {
    REQUIRE(value.isNone());
  } else if (type == "int") {
    REQUIRE(value.isInt());
    REQUIRE(value.toInt() == expected["value"].get<int64_t>());
  } else if (type == "float") {
    REQUIRE(value.isDouble());
    REQUIRE(value.toDouble() == expected["value"].get<double>());
  } else if (type == "str") {
    REQUIRE(value.isString());
    REQUIRE(value.toStringRef() == expected["value"].get<std::string>());
  } else if (type == "bool") {
    REQUIRE(value.isBool());
    REQUIRE(value.toBool() == expected["value"].get<bool>());
  } else if (type == "tuple") {
    REQUIRE(value.isTuple());
    const auto& elements = value.toTupleRef().elements();
    REQUIRE(elements.size() == expected["items"].size());
    for (std::size_t i = 0; i < elements.size(); ++i) {
      check_ivalue(where + "/" + std::to_string(i), elements[i], expected["items"][i]);
    }
  } else {
    FAIL("unexpected manifest type " << type);
  }
}

void check_state_dict(const std::string& name, const StateDict& loaded,
                      const std::string& version = "2.6") {
  const json expected = manifest(name, version)["state_dict"];
  REQUIRE(loaded.size() == expected["items"].size());
  for (const auto& [key, item] : expected["items"].items()) {
    REQUIRE(loaded.contains(key));
    check_value(key, loaded.at(key), item);
  }
}

}  // namespace

TEST_CASE("every single-rank PyTorch fixture loads without a target, value for value") {
  for (const std::string name : {"single_rank_mixed", "model_optim_adam", "two_rank_sharded"}) {
    SECTION(name) { check_state_dict(name, dcpp::load_from_keys(dcpp::test::fixture(name))); }
  }
}

TEST_CASE("every PyTorch 2.14 fixture of the default format loads without a target") {
  // StorageMeta.modules (2.7+) and Metadata.version "1.0.0" (2.8+) in every .metadata.
  for (const std::string name :
       {"single_rank_mixed", "model_optim_adam", "two_rank_sharded", "default_2x"}) {
    SECTION(name) {
      check_state_dict(name, dcpp::load_from_keys(dcpp::test::fixture(name, "2.14")), "2.14");
      const dcpp::Metadata metadata = dcpp::read_metadata(dcpp::test::fixture(name, "2.14"));
      REQUIRE(metadata.version == std::optional<std::string>("1.0.0"));
      REQUIRE(metadata.storage_meta.has_value());
      REQUIRE(metadata.storage_meta->modules.empty());
      REQUIRE(metadata.storage_meta->checkpoint_id == std::optional<std::string>(name));
    }
  }
}

TEST_CASE("PyTorch 2.14's two-rank checkpoint loads in place into preallocated tensors") {
  StateDict exp;
  exp.insert("step", at::zeros({}));
  exp.insert("exp_avg", at::zeros({8, 5}));
  StateDict state;
  state.insert("w", exp);
  StateDict opt;
  opt.insert("state", state);
  StateDict target;
  target.insert("w", at::zeros({8, 5}));
  target.insert("r", at::zeros({4}));
  target.insert("opt", opt);
  dcpp::LoadOptions options;
  options.allow_partial_load = true;  // param_groups stay out of the target
  dcpp::load(target, dcpp::test::fixture("default_2x", "2.14"), options);
  const json expected = manifest("default_2x", "2.14")["state_dict"]["items"];
  check_tensor("w", target.at("w").tensor(), expected["w"]);
  check_tensor("r", target.at("r").tensor(), expected["r"]);
  const json& saved_w = expected["opt"]["items"]["state"]["items"]["w"]["items"];
  const StateDict& loaded_w = target.at("opt").dict().at("state").dict().at("w").dict();
  check_tensor("step", loaded_w.at("step").tensor(), saved_w["step"]);
  check_tensor("exp_avg", loaded_w.at("exp_avg").tensor(), saved_w["exp_avg"]);
}

TEST_CASE("a PyTorch fixture loads in place into preallocated tensors") {
  StateDict model;
  model.insert("linear.weight", at::zeros({8, 4}));
  model.insert("emb.weight", at::zeros({16, 8}, at::kBFloat16));
  model.insert("mask", at::zeros({3}, at::kBool));
  model.insert("empty", at::zeros({0, 3}));
  model.insert("scalar", at::zeros({}));
  StateDict target;
  target.insert("model", model);
  target.insert("step", 0);
  target.insert("betas", c10::IValue(std::make_tuple(0.0, 0.0)));
  target.insert("noncontig", at::zeros({4, 3}));
  const at::Tensor weight = target.at("model").dict().at("linear.weight").tensor();

  dcpp::LoadOptions options;
  options.allow_partial_load = false;
  const dcpp::IncompatibleKeys report =
      dcpp::load(target, dcpp::test::fixture("single_rank_mixed"), options);

  const json expected = manifest("single_rank_mixed")["state_dict"]["items"];
  check_tensor("linear.weight", weight, expected["model"]["items"]["linear.weight"]);
  check_tensor("emb.weight", target.at("model").dict().at("emb.weight").tensor(),
               expected["model"]["items"]["emb.weight"]);
  check_tensor("noncontig", target.at("noncontig").tensor(), expected["noncontig"]);
  // The saved tensor was arange(12).reshape(3, 4).t(): strides (1, 4) honoured.
  REQUIRE(dcpp::test::bitwise_equal(target.at("noncontig").tensor(),
                                    at::arange(12, at::kFloat).reshape({3, 4}).t()));
  REQUIRE(target.at("step").value().toInt() == 7);
  REQUIRE(target.at("betas").value().toTupleRef().elements()[1].toDouble() == 0.999);
  REQUIRE(report.missing_keys.empty());
  REQUIRE(std::find(report.unexpected_keys.begin(), report.unexpected_keys.end(), "lr") !=
          report.unexpected_keys.end());
}

TEST_CASE("the fixture's .metadata decodes to DCP's structures") {
  const dcpp::Metadata metadata = dcpp::read_metadata(dcpp::test::fixture("two_rank_sharded"));
  const auto& entries = metadata.state_dict_metadata;
  auto w_row = std::find_if(entries.begin(), entries.end(),
                            [](const auto& e) { return e.first == "w_row"; });
  REQUIRE(w_row != entries.end());
  const auto& tensor = std::get<dcpp::TensorStorageMetadata>(w_row->second);
  REQUIRE(tensor.size == std::vector<int64_t>{8, 6});
  REQUIRE(tensor.chunks.size() == 2);
  REQUIRE(tensor.chunks[1].offsets == std::vector<int64_t>{4, 0});
  REQUIRE(tensor.chunks[1].sizes == std::vector<int64_t>{4, 6});
}
