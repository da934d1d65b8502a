#include "state_dict/state_value_ivalue.h"

#include <dcpp/core/checkpoint_error.h>

namespace dcpp::detail {

c10::IValue whole_state_to_ivalue(const StateValue& value, const std::string& key,
                                  const std::function<at::Tensor(const at::Tensor&)>& on_tensor) {
  const auto child_key = [&](const std::string& child) {
    return key.empty() ? child : key + "." + child;
  };
  switch (value.kind()) {
    case StateValue::Kind::kValue:
      return value.value();
    case StateValue::Kind::kTensor:
      return on_tensor ? on_tensor(value.tensor()) : value.tensor();
    case StateValue::Kind::kDict: {
      c10::impl::GenericDict dict(c10::StringType::get(), c10::AnyType::get());
      for (const auto& item : value.dict()) {
        dict.insert(item.key, whole_state_to_ivalue(item.value, child_key(item.key), on_tensor));
      }
      return dict;
    }
    case StateValue::Kind::kList: {
      c10::impl::GenericList list(c10::AnyType::get());
      int64_t i = 0;
      for (const StateValue& element : value.list()) {
        list.push_back(whole_state_to_ivalue(element, child_key(std::to_string(i++)), on_tensor));
      }
      return list;
    }
    default:
      throw CheckpointError(ErrorKind::kUsage, "key '" + key + "' holds a " + value.kind_name() +
                                                   ", not a whole tensor or value");
  }
}

}  // namespace dcpp::detail
