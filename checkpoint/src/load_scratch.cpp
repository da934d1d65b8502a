#include "load_scratch.h"

#include <dcpp/state_dict/sharded_tensor.h>

#include <ATen/ATen.h>

namespace dcpp::detail {

namespace {

StateValue scratch_of(const StateValue& value) {
  switch (value.kind()) {
    case StateValue::Kind::kTensor:
      return StateValue(value.tensor().detach().clone());
    case StateValue::Kind::kShardedTensor: {
      const ShardedTensor& sharded = value.sharded_tensor();
      std::vector<Shard> shards;
      for (const Shard& shard : sharded.local_shards()) {
        shards.push_back(Shard{shard.tensor.detach().clone(), shard.offsets});
      }
      return ShardedTensor(sharded.global_shape(), std::move(shards), sharded.dtype());
    }
    case StateValue::Kind::kDict:
      return make_load_scratch(value.dict());
    case StateValue::Kind::kList: {
      StateList copy;
      for (const StateValue& element : value.list()) {
        copy.push_back(scratch_of(element));
      }
      return copy;
    }
    default:
      return value;
  }
}

bool same_layout(const at::Tensor& target, const at::Tensor& loaded) {
  return target.defined() && loaded.defined() && target.sizes() == loaded.sizes() &&
         target.scalar_type() == loaded.scalar_type();
}

void apply_value(StateValue& target, const StateValue& loaded) {
  if (target.is_tensor() && loaded.is_tensor() && same_layout(target.tensor(), loaded.tensor())) {
    if (!target.tensor().is_same(loaded.tensor())) {
      target.tensor().copy_(loaded.tensor());
    }
    return;
  }
  if (target.is_sharded_tensor() && loaded.is_sharded_tensor()) {
    const auto& targets = target.sharded_tensor().local_shards();
    const auto& shards = loaded.sharded_tensor().local_shards();
    if (targets.size() == shards.size()) {
      bool same = true;
      for (std::size_t i = 0; i < targets.size() && same; ++i) {
        same = same_layout(targets[i].tensor, shards[i].tensor);
      }
      if (same) {
        for (std::size_t i = 0; i < targets.size(); ++i) {
          targets[i].tensor.copy_(shards[i].tensor);
        }
        return;
      }
    }
  }
  if (target.is_dict() && loaded.is_dict()) {
    apply_loaded_scratch(target.dict(), loaded.dict());
    return;
  }
  if (target.is_list() && loaded.is_list() && target.list().size() == loaded.list().size()) {
    for (std::size_t i = 0; i < loaded.list().size(); ++i) {
      apply_value(target.list()[i], loaded.list()[i]);
    }
    return;
  }
  target = loaded;
}

}  // namespace

StateDict make_load_scratch(const StateDict& targets) {
  StateDict scratch;
  for (const auto& item : targets) {
    scratch.insert(item.key, scratch_of(item.value));
  }
  return scratch;
}

void apply_loaded_scratch(StateDict& targets, const StateDict& scratch) {
  c10::AutoGradMode no_grad(false);  // parameters are written as data, not recorded
  for (const auto& item : scratch) {
    if (StateValue* target = targets.find(item.key)) {
      apply_value(*target, item.value);
    } else {
      targets.insert(item.key, item.value);
    }
  }
}

}  // namespace dcpp::detail
