#include <dcpp/state_dict/whole_value.h>

#include "state_dict/state_value_ivalue.h"

namespace dcpp {

c10::IValue whole_value(c10::IValue value) {
  if (whole_value_of(value) != nullptr) return value;
  return c10::IValue::make_capsule(c10::make_intrusive<WholeValue>(std::move(value)));
}

c10::IValue whole_value(const StateDict& state) {
  return whole_value(detail::whole_state_to_ivalue(StateValue(state), ""));
}

const c10::IValue* whole_value_of(const c10::IValue& value) {
  if (!value.isCapsule()) return nullptr;
  const auto* whole = dynamic_cast<const WholeValue*>(value.toCapsule().get());
  return whole == nullptr ? nullptr : &whole->value;
}

}  // namespace dcpp
