#include "dcpp_test.h"

#include <dcpp/core/checkpoint_error.h>
#include <dcpp/state_dict/flatten.h>
#include <dcpp/state_dict/stateful.h>

using dcpp::ObjectPath;
using dcpp::StateDict;
using dcpp::StateList;
using dcpp::StateValue;

namespace {

std::vector<std::string> keys_of(const std::vector<dcpp::FlatEntry>& entries) {
  std::vector<std::string> keys;
  for (const auto& entry : entries) {
    keys.push_back(entry.key);
  }
  return keys;
}

}  // namespace

TEST_CASE("flattening descends into dicts and keeps the real path of dotted keys") {
  StateDict optim_state;
  optim_state.insert("exp_avg", at::zeros({2}));
  StateDict state;
  state.insert("0.weight", optim_state);
  StateDict optim;
  optim.insert("state", state);
  StateDict root;
  root.insert("optim", optim);
  root.insert("step", 3);

  auto entries = dcpp::flatten_state_dict(root);
  REQUIRE(keys_of(entries) == std::vector<std::string>{"optim.state.0.weight.exp_avg", "step"});
  REQUIRE((entries[0].path == ObjectPath{std::string("optim"), std::string("state"),
                                         std::string("0.weight"), std::string("exp_avg")}));
  REQUIRE(entries[0].value->is_tensor());
  REQUIRE(entries[1].value->value().toInt() == 3);
}

TEST_CASE("lists are flattened only when they hold tensors or dicts, tuples never") {
  StateDict root;
  root.insert("ints", StateList{1, 2, 3});
  root.insert("tensors", StateList{at::zeros({1}), at::ones({2})});
  StateDict inner;
  inner.insert("a", 1);
  root.insert("dicts", StateList{inner});
  root.insert("mixed", StateList{at::zeros({1}), 7});
  root.insert("nested_plain", StateList{StateList{1, 2}, StateList{3}});
  // StateValue(...) spelled out: StateList{StateList{x}} is a copy for Clang and a nested list for
  // GCC (CWG 2137).
  root.insert("nested_tensor", StateList{StateValue(StateList{at::zeros({1})})});
  root.insert("tuple", c10::IValue(std::make_tuple(at::zeros({1}), int64_t{2})));
  StateDict empty;
  root.insert("empty_dict", empty);

  auto entries = dcpp::flatten_state_dict(root);
  REQUIRE(keys_of(entries) ==
          std::vector<std::string>{"ints", "tensors.0", "tensors.1", "dicts.0.a", "mixed.0",
                                   "mixed.1", "nested_plain", "nested_tensor.0.0", "tuple"});
  REQUIRE((entries[1].path == ObjectPath{std::string("tensors"), int64_t{0}}));
  REQUIRE((entries[3].path == ObjectPath{std::string("dicts"), int64_t{0}, std::string("a")}));
  REQUIRE(entries[0].value->is_list());
  REQUIRE(entries[8].value->is_value());
  REQUIRE(entries[8].value->value().isTuple());
}

TEST_CASE("keys that collide once joined are an error naming the key") {
  StateDict inner;
  inner.insert("b", 1);
  StateDict root;
  root.insert("a.b", 2);
  root.insert("a", inner);
  REQUIRE_THROWS_WITH(dcpp::flatten_state_dict(root), Catch::Contains("'a.b'"));
}

TEST_CASE("set_element rebuilds nested dicts and lists from paths") {
  StateDict root;
  dcpp::set_element(root, {std::string("m"), std::string("0.weight")}, at::ones({2}));
  dcpp::set_element(root, {std::string("l"), int64_t{2}}, 5);
  dcpp::set_element(root, {std::string("l"), int64_t{0}, std::string("k")}, 6);

  REQUIRE(root.at("m").dict().at("0.weight").is_tensor());
  const StateList& list = root.at("l").list();
  REQUIRE(list.size() == 3);
  REQUIRE(list[0].dict().at("k").value().toInt() == 6);
  REQUIRE(list[1].value().isNone());
  REQUIRE(list[2].value().toInt() == 5);
  REQUIRE(dcpp::find_element(root, {std::string("l"), int64_t{2}})->value().toInt() == 5);
  REQUIRE(dcpp::find_element(root, {std::string("l"), int64_t{9}}) == nullptr);

  REQUIRE_THROWS_AS(dcpp::set_element(root, {std::string("m"), int64_t{0}}, 1),
                    dcpp::CheckpointError);
}

TEST_CASE("an unresolved Stateful cannot be flattened") {
  struct Counter : dcpp::Stateful {
    StateDict state_dict() override { return {}; }
    void load_state_dict(const StateDict&) override {}
  };
  StateDict root;
  root.insert("counter", std::make_shared<Counter>());
  REQUIRE_THROWS_WITH(dcpp::flatten_state_dict(root), Catch::Contains("counter"));
}
