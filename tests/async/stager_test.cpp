// The stagers: staged copies equal the source and no longer change with it; buffers are allocated
// once and reused while the structure stays the same; Stateful objects are resolved at stage time.

#include "dcpp_test.h"

#include "async_test_util.h"

#include <dcpp/async/blocking_stager.h>
#include <dcpp/async/tbb_stager.h>

namespace {

std::unique_ptr<dcpp::AsyncStager> make(const std::string& name) {
  if (name == "tbb") {
    dcpp::TbbStagerOptions options;
    options.concurrency = 2;
    options.piece_bytes = 4096;
    return dcpp::make_tbb_stager(options);
  }
  dcpp::BlockingStagerOptions options;
  options.piece_bytes = 4096;
  return dcpp::make_blocking_stager(options);
}

// Every tensor of a staged tree by dotted key (shards as "key/i").
void collect(const dcpp::StateValue& value, const std::string& key,
             std::map<std::string, at::Tensor>& out) {
  if (value.is_tensor()) {
    out[key] = value.tensor();
  } else if (value.is_sharded_tensor()) {
    for (std::size_t i = 0; i < value.sharded_tensor().local_shards().size(); ++i) {
      out[key + "/" + std::to_string(i)] = value.sharded_tensor().local_shards()[i].tensor;
    }
  } else if (value.is_dict()) {
    for (const auto& item : value.dict()) {
      collect(item.value, key.empty() ? item.key : key + "." + item.key, out);
    }
  } else if (value.is_list()) {
    for (std::size_t i = 0; i < value.list().size(); ++i) {
      collect(value.list()[i], key + "." + std::to_string(i), out);
    }
  }
}

std::map<std::string, at::Tensor> tensors_of(const dcpp::StateDict& state) {
  std::map<std::string, at::Tensor> out;
  collect(dcpp::StateValue(state), "", out);
  return out;
}

}  // namespace

TEST_CASE("staged copies equal the state at stage time and reuse their buffers") {
  for (const std::string name : {"blocking", "tbb"}) {
    INFO("stager " << name);
    std::unique_ptr<dcpp::AsyncStager> stager = make(name);
    dcpp::test::MixedState state(11);
    const auto expected = state.expected_tensors();

    dcpp::StateDict first = stager->stage(state.state).get();
    stager->synchronize_staging();
    // Every kind is there: Stateful resolved to its dict, shards with their offsets, values.
    REQUIRE(first.at("counter").is_dict());
    CHECK(first.at("counter").dict().at("count").value().toInt() == 11);
    CHECK(first.at("step").value().toInt() == 11);
    CHECK(first.at("name").value().toStringRef() == "run");
    CHECK(first.at("list").list()[1].value().toInt() == 3);
    const dcpp::ShardedTensor& sharded = first.at("sharded").sharded_tensor();
    REQUIRE(sharded.local_shards().size() == 2);
    CHECK(sharded.local_shards()[1].offsets == std::vector<int64_t>{5, 0});
    CHECK(sharded.global_shape() == std::vector<int64_t>{8, 6});

    auto staged = tensors_of(first);
    CHECK(
        dcpp::test::bitwise_equal(staged.at("nested.model.big"), expected.at("nested.model.big")));
    CHECK(dcpp::test::bitwise_equal(staged.at("nested.model.transposed"),
                                    expected.at("nested.model.transposed")));
    CHECK(dcpp::test::bitwise_equal(staged.at("nested.model.flags"),
                                    expected.at("nested.model.flags")));
    CHECK(dcpp::test::bitwise_equal(at::cat({staged.at("sharded/0"), staged.at("sharded/1")}),
                                    expected.at("sharded")));
    CHECK(dcpp::test::bitwise_equal(staged.at("counter.weight"), expected.at("counter.weight")));

    // The source changes; the staged copy does not.
    state.mutate_everything();
    CHECK(
        dcpp::test::bitwise_equal(staged.at("nested.model.big"), expected.at("nested.model.big")));

    // Same structure: same buffers, now holding the new values.
    const int64_t bytes = stager->staging_bytes();
    CHECK(bytes > 1200000);
    const auto after = state.expected_tensors();
    auto second = tensors_of(stager->stage(state.state).get());
    for (const auto& [key, tensor] : staged) {
      INFO("key " << key);
      CHECK(second.at(key).data_ptr() == tensor.data_ptr());
    }
    CHECK(dcpp::test::bitwise_equal(second.at("nested.model.big"), after.at("nested.model.big")));
    CHECK(stager->staging_bytes() == bytes);

    // A changed shape: new buffers, the old set released (bytes do not add up).
    state.state.at("nested").dict().at("model").dict().insert_or_assign("big", at::ones({10}));
    auto third = tensors_of(stager->stage(state.state).get());
    CHECK(third.at("nested.model.big").data_ptr() != staged.at("nested.model.big").data_ptr());
    CHECK(stager->staging_bytes() < bytes);
    CHECK(dcpp::test::bitwise_equal(third.at("nested.model.big"), at::ones({10})));
  }
}

TEST_CASE("an empty state dict and empty tensors stage") {
  for (const std::string name : {"blocking", "tbb"}) {
    std::unique_ptr<dcpp::AsyncStager> stager = make(name);
    CHECK(stager->stage(dcpp::StateDict()).get().empty());
    dcpp::StateDict state;
    state.insert("empty", at::empty({0, 3}));
    state.insert("scalar", at::scalar_tensor(2.5));
    dcpp::StateDict staged = stager->stage(state).get();
    CHECK(staged.at("empty").tensor().sizes() == at::IntArrayRef({0, 3}));
    CHECK(staged.at("scalar").tensor().item<double>() == 2.5);
  }
}

TEST_CASE("the TBB stager refuses a concurrency below 1") {
  dcpp::TbbStagerOptions options;
  options.concurrency = 0;
  CHECK_THROWS_WITH(dcpp::make_tbb_stager(options), Catch::Contains("concurrency"));
}

TEST_CASE("the TBB stager runs a stage() called before the previous one completed after it") {
  // Stages run one after the other (AsyncStager::stage): the second waits for the first's copies,
  // which, with CUDA, record the events the second records again.
  dcpp::TbbStagerOptions options;
  options.concurrency = 1;
  options.nice = 0;
  options.piece_bytes = 1 << 12;  // 4,096 pieces: the first stage is far from done at once
  const auto stager = dcpp::make_tbb_stager(options);
  dcpp::StateDict first;
  first.insert("weight", at::full({1 << 22}, 1.0f));
  dcpp::StateDict second;
  second.insert("weight", at::full({1 << 22}, 2.0f));
  const dcpp::Future<dcpp::StateDict> staged_first = stager->stage(first);
  const dcpp::Future<dcpp::StateDict> staged_second = stager->stage(second);
  CHECK(staged_first.is_ready());
  CHECK(dcpp::test::bitwise_equal(staged_second.get().at("weight").tensor(),
                                  second.at("weight").tensor()));
}
