#include "async_test_util.h"

#include "dcpp_test.h"

#include <dcpp/checkpoint/checkpointer.h>

namespace dcpp::test {

MixedState::MixedState(int64_t seed) {
  at::manual_seed(static_cast<uint64_t>(seed));
  at::Tensor big = at::randn({300, 1000});  // 1.2 MB: many pieces at small piece sizes
  at::Tensor doubles = at::randn({7, 3}, at::kDouble);
  at::Tensor ints = at::randint(0, 1 << 30, {33}, at::kLong);
  at::Tensor halves = at::randn({5, 5}).to(at::kBFloat16);
  at::Tensor flags = at::randint(0, 2, {9}).to(at::kBool);
  at::Tensor transposed_base = at::randn({6, 4});
  at::Tensor full = at::randn({8, 6});
  at::Tensor listed = at::randn({4});
  at::Tensor weight = at::randn({3, 3});
  bases_ = {big, doubles, ints, halves, flags, transposed_base, full, listed, weight};

  StateDict model;
  model.insert("big", big);
  model.insert("doubles", doubles);
  model.insert("ints", ints);
  model.insert("halves", halves);
  model.insert("flags", flags);
  model.insert("transposed", transposed_base.t());  // non-contiguous view
  StateDict nested;
  nested.insert("model", model);
  state.insert("nested", nested);
  state.insert("sharded",
               ShardedTensor({8, 6}, {Shard{full.narrow(0, 0, 5), {0, 0}},
                                      Shard{full.narrow(0, 5, 3), {5, 0}}}));
  state.insert("list", StateList{listed, StateValue(int64_t{3})});
  state.insert("step", seed);
  state.insert("name", "run");
  counter = std::make_shared<Counter>(weight);
  counter->count = seed;
  state.insert("counter", counter);
}

std::map<std::string, at::Tensor> MixedState::expected_tensors() const {
  std::map<std::string, at::Tensor> expected;
  const StateDict& model = state.at("nested").dict().at("model").dict();
  for (const auto& item : model) {
    expected["nested.model." + item.key] = item.value.tensor().clone();
  }
  expected["sharded"] = bases_[6].clone();
  expected["list.0"] = state.at("list").list()[0].tensor().clone();
  expected["counter.weight"] = counter->weight.clone();
  return expected;
}

void MixedState::mutate_everything() {
  for (at::Tensor& base : bases_) {
    auto* bytes = static_cast<unsigned char*>(base.data_ptr());
    const int64_t n = base.numel() * static_cast<int64_t>(base.element_size());
    for (int64_t i = 0; i < n; ++i) {
      // bool tensors must keep 0/1 bytes: flip the lowest bit only
      bytes[i] = base.scalar_type() == at::kBool ? bytes[i] ^ 1 : bytes[i] ^ 0xA5;
    }
  }
  ++counter->count;
}

std::map<std::string, at::Tensor> load_tensors(const std::string& directory) {
  StateDict loaded = load_from_keys(directory);
  std::map<std::string, at::Tensor> tensors;
  for (const FlatEntry& entry : flatten_state_dict(loaded)) {
    if (entry.value->is_tensor()) {
      tensors[entry.key] = entry.value->tensor();
    }
  }
  return tensors;
}

}  // namespace dcpp::test
