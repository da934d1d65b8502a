#include "state_tools.h"

#include <dcpp/state_dict/stateful.h>

#include <vector>

namespace dcpp::detail {
namespace {

int64_t value_bytes(const StateValue& value) {
  switch (value.kind()) {
    case StateValue::Kind::kTensor:
      return static_cast<int64_t>(value.tensor().nbytes());
    case StateValue::Kind::kShardedTensor: {
      int64_t n = 0;
      for (const auto& shard : value.sharded_tensor().local_shards()) n += shard.tensor.nbytes();
      return n;
    }
    case StateValue::Kind::kDict:
      return tensor_bytes(value.dict());
    case StateValue::Kind::kList: {
      int64_t n = 0;
      for (const auto& v : value.list()) n += value_bytes(v);
      return n;
    }
    default:
      return 0;
  }
}

StateValue cast_value(const StateValue& value, at::ScalarType dtype) {
  switch (value.kind()) {
    case StateValue::Kind::kTensor: {
      const at::Tensor& t = value.tensor();
      return at::isFloatingType(t.scalar_type()) ? t.to(dtype) : t;
    }
    case StateValue::Kind::kShardedTensor: {
      const ShardedTensor& st = value.sharded_tensor();
      if (!at::isFloatingType(st.dtype())) return value;
      std::vector<Shard> shards;
      for (const auto& s : st.local_shards()) shards.push_back({s.tensor.to(dtype), s.offsets});
      return ShardedTensor(st.global_shape(), std::move(shards), dtype);
    }
    case StateValue::Kind::kDict:
      return cast_floating(value.dict(), dtype);
    case StateValue::Kind::kList: {
      StateList out;
      for (const auto& v : value.list()) out.push_back(cast_value(v, dtype));
      return out;
    }
    default:
      return value;
  }
}

}  // namespace

int64_t tensor_bytes(const StateDict& state) {
  int64_t n = 0;
  for (const auto& item : state) n += value_bytes(item.value);
  return n;
}

StateDict cast_floating(const StateDict& state, std::optional<at::ScalarType> dtype) {
  if (!dtype) return state;
  StateDict out;
  for (const auto& item : state) out.insert(item.key, cast_value(item.value, *dtype));
  return out;
}

std::set<std::string> erase_keys(StateDict& state, const std::set<std::string>& excluded,
                                 const std::string& prefix) {
  std::set<std::string> erased;
  std::vector<std::string> doomed;
  for (auto& item : state) {
    const std::string key = prefix.empty() ? item.key : prefix + "." + item.key;
    if (excluded.count(key) != 0) {
      doomed.push_back(item.key);
      erased.insert(key);
    } else if (item.value.is_dict()) {
      for (auto& k : erase_keys(item.value.dict(), excluded, key)) erased.insert(k);
    }
  }
  for (const auto& k : doomed) state.erase(k);
  return erased;
}

namespace {

void copy_loaded_value(StateValue& into, const StateValue& loaded) {
  if (loaded.is_value()) {
    into = loaded;
  } else if (loaded.is_dict() && into.is_dict()) {
    copy_loaded_values(into.dict(), loaded.dict());
  } else if (loaded.is_list() && into.is_list()) {
    for (std::size_t i = 0; i < loaded.list().size() && i < into.list().size(); ++i) {
      copy_loaded_value(into.list()[i], loaded.list()[i]);
    }
  }
}

}  // namespace

void copy_loaded_values(StateDict& state, const StateDict& loaded) {
  for (const auto& item : loaded) {
    if (StateValue* into = state.find(item.key)) copy_loaded_value(*into, item.value);
  }
}

}  // namespace dcpp::detail
