#include "dcpp_test.h"

#include <dcpp/core/checkpoint_error.h>
#include <dcpp/state_dict/sharded_tensor.h>
#include <dcpp/state_dict/state_dict.h>

using dcpp::StateDict;
using dcpp::StateValue;

TEST_CASE("a state dict keeps insertion order and unique keys") {
  StateDict dict;
  dict.insert("b", 1);
  dict.insert("a", 2.5);
  dict.insert("c", "text");
  dict.insert_or_assign("b", true);  // replaces in place
  std::vector<std::string> keys;
  for (const auto& item : dict) {
    keys.push_back(item.key);
  }
  REQUIRE(keys == std::vector<std::string>{"b", "a", "c"});
  REQUIRE(dict.at("b").value().toBool());
  REQUIRE(dict.at("a").value().toDouble() == 2.5);
  REQUIRE(dict.at("c").value().toStringRef() == "text");
  REQUIRE(dict.erase("a"));
  REQUIRE_FALSE(dict.contains("a"));
  REQUIRE(dict.at("c").value().toStringRef() == "text");
  REQUIRE_THROWS_WITH(dict.at("missing"), Catch::Contains("'missing'"));
}

TEST_CASE("insert refuses a duplicate key as torch::OrderedDict does, insert_or_assign replaces") {
  StateDict dict;
  dict.insert("w", 1);
  REQUIRE_THROWS_AS(dict.insert("w", 2), dcpp::CheckpointError);
  REQUIRE_THROWS_WITH(dict.insert("w", 2),
                      Catch::Contains("'w'") && Catch::Contains("insert_or_assign"));
  try {
    dict.insert("w", 2);
  } catch (const dcpp::CheckpointError& error) {
    CHECK(error.kind() == dcpp::ErrorKind::kUsage);
  }
  REQUIRE(dict.at("w").value().toInt() == 1);  // the failed insert left the value alone
  dict.insert_or_assign("w", 3);
  dict.insert_or_assign("v", 4);
  REQUIRE(dict.size() == 2);
  REQUIRE(dict.at("w").value().toInt() == 3);
  REQUIRE(dict.begin()->key == "w");
}

TEST_CASE("IValues are sorted into tensors, dicts, lists and leaves") {
  c10::impl::GenericDict generic(c10::StringType::get(), c10::AnyType::get());
  generic.insert("t", at::ones({2}));
  generic.insert("n", int64_t{4});
  StateValue from_dict{c10::IValue(generic)};
  REQUIRE(from_dict.is_dict());
  REQUIRE(from_dict.dict().at("t").is_tensor());
  REQUIRE(from_dict.dict().at("n").value().toInt() == 4);

  StateValue from_list{c10::IValue(std::vector<int64_t>{1, 2})};
  REQUIRE(from_list.is_list());
  REQUIRE(from_list.list()[1].value().toInt() == 2);

  StateValue tuple{c10::IValue(std::make_tuple(1.0, 2.0))};
  REQUIRE(tuple.is_value());
  REQUIRE_THROWS_WITH(tuple.tensor(), Catch::Contains("not a tensor"));
}

TEST_CASE("copies of a state dict share tensors but not structure") {
  StateDict original;
  original.insert("w", at::zeros({3}));
  StateDict copy = original;
  copy.insert("extra", 1);
  copy.at("w").tensor().fill_(7);
  REQUIRE(original.size() == 1);
  REQUIRE(original.at("w").tensor().sum().item<float>() == 21.0f);
}

TEST_CASE("sharded tensors check their shards against the global shape") {
  at::Tensor full = at::arange(10, at::kFloat).reshape({5, 2});
  auto part = dcpp::ShardedTensor::from_chunk_of(full, 0, 1, 3);  // rows 2..3 (5 = 2 + 2 + 1)
  REQUIRE(part.global_shape() == std::vector<int64_t>{5, 2});
  REQUIRE(part.local_shards().size() == 1);
  REQUIRE(part.local_shards()[0].offsets == std::vector<int64_t>{2, 0});
  REQUIRE(part.local_shards()[0].tensor.size(0) == 2);
  auto last = dcpp::ShardedTensor::from_chunk_of(full, 0, 2, 3);
  REQUIRE(last.local_shards()[0].offsets == std::vector<int64_t>{4, 0});
  REQUIRE(last.local_shards()[0].tensor.size(0) == 1);

  REQUIRE_THROWS_WITH(dcpp::ShardedTensor({4, 2}, {dcpp::Shard{at::zeros({2, 2}), {3, 0}}}),
                      Catch::Contains("outside global shape"));
  REQUIRE_THROWS_AS(dcpp::ShardedTensor({4, 2}, {dcpp::Shard{at::zeros({2}), {0, 0}}}),
                    dcpp::CheckpointError);
}
