#include <dcpp/state_dict/stateful_swap.h>

#include <dcpp/core/checkpoint_error.h>
#include <dcpp/state_dict/stateful.h>

namespace dcpp {

namespace {

std::string describe(const std::exception& error) {
  const auto* torch_error = dynamic_cast<const c10::Error*>(&error);
  return torch_error ? torch_error->what_without_backtrace() : error.what();
}

StateDict state_of(Stateful& stateful, const ObjectPath& path) {
  try {
    return stateful.state_dict();
  } catch (const CheckpointError&) {
    throw;  // dcpp's own error type (a user's subclass too) passes as it is
  } catch (const std::exception& error) {
    throw CheckpointError(
        ErrorKind::kUsage,
        "key '" + join_path(path) + "': its Stateful's state_dict() threw: " + describe(error));
  } catch (...) {
    throw CheckpointError(ErrorKind::kUsage,
                          "key '" + join_path(path) +
                              "': its Stateful's state_dict() threw an exception that is not a "
                              "std::exception");
  }
}

}  // namespace

StatefulSwap::StatefulSwap(StateDict& root) {
  try {
    ObjectPath path;
    for (auto& item : root) {
      path.emplace_back(item.key);
      swap_in(item.value, path);
      path.pop_back();
    }
  } catch (...) {
    restore();
    throw;
  }
}

StatefulSwap::~StatefulSwap() { restore(); }

void StatefulSwap::restore() noexcept {
  // Innermost first: an inner slot lives in its outer Stateful's dict.
  for (auto it = swapped_.rbegin(); it != swapped_.rend(); ++it) {
    *it->slot = StateValue(it->stateful);
  }
  swapped_.clear();
}

void StatefulSwap::commit() {
  while (!swapped_.empty()) {
    Swapped innermost = swapped_.back();
    const StateDict loaded = innermost.slot->dict();
    *innermost.slot = StateValue(innermost.stateful);
    swapped_.pop_back();
    innermost.stateful->load_state_dict(loaded);
  }
}

void StatefulSwap::swap_in(StateValue& value, ObjectPath& path) {
  if (value.is_stateful()) {
    std::shared_ptr<Stateful> stateful = value.stateful();
    StateDict own = state_of(*stateful, path);
    value = StateValue(std::move(own));
    swapped_.push_back(Swapped{&value, std::move(stateful), path});
  }
  if (value.is_dict()) {
    for (auto& item : value.dict()) {
      path.emplace_back(item.key);
      swap_in(item.value, path);
      path.pop_back();
    }
  } else if (value.is_list()) {
    int64_t index = 0;
    for (StateValue& element : value.list()) {
      path.emplace_back(index++);
      swap_in(element, path);
      path.pop_back();
    }
  }
}

StateDict resolve_statefuls(const StateDict& state_dict) {
  StateDict copy = state_dict;
  StatefulSwap(copy).release();
  return copy;
}

}  // namespace dcpp
