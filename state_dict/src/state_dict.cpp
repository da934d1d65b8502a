#include <dcpp/state_dict/state_dict.h>

#include <dcpp/core/checkpoint_error.h>
#include <dcpp/state_dict/stateful.h>

namespace dcpp {

// ---- StateDict -------------------------------------------------------------------------------

StateDict::StateDict() = default;
StateDict::StateDict(const StateDict&) = default;
StateDict::StateDict(StateDict&&) noexcept = default;
StateDict& StateDict::operator=(const StateDict&) = default;
StateDict& StateDict::operator=(StateDict&&) noexcept = default;
StateDict::~StateDict() = default;

StateValue& StateDict::insert(const std::string& key, StateValue value) {
  if (contains(key)) {
    throw CheckpointError(ErrorKind::kUsage,
                          "key '" + key +
                              "' is already in the state dict; use insert_or_assign to replace its "
                              "value");
  }
  return insert_or_assign(key, std::move(value));
}

StateValue& StateDict::insert_or_assign(const std::string& key, StateValue value) {
  auto found = index_.find(key);
  if (found != index_.end()) {
    items_[found->second].value = std::move(value);
    return items_[found->second].value;
  }
  index_.emplace(key, items_.size());
  items_.push_back(Item{key, std::move(value)});
  return items_.back().value;
}

StateValue& StateDict::operator[](const std::string& key) {
  if (StateValue* value = find(key)) {
    return *value;
  }
  return insert(key, StateValue());
}

StateValue& StateDict::at(const std::string& key) {
  return const_cast<StateValue&>(static_cast<const StateDict&>(*this).at(key));
}

const StateValue& StateDict::at(const std::string& key) const {
  const StateValue* value = find(key);
  if (value == nullptr) {
    std::string keys;
    std::size_t listed = 0;
    for (const Item& item : items_) {
      if (listed++ == 8) {
        keys += ", ...";
        break;
      }
      keys += (keys.empty() ? "'" : ", '") + item.key + "'";
    }
    throw CheckpointError(ErrorKind::kNotFound,
                          "state dict has no key '" + key + "' (" +
                              (keys.empty() ? std::string("it is empty") : "its keys: " + keys) +
                              "); check the key, or look it up with find() or contains()");
  }
  return *value;
}

StateValue* StateDict::find(const std::string& key) {
  auto found = index_.find(key);
  return found == index_.end() ? nullptr : &items_[found->second].value;
}

const StateValue* StateDict::find(const std::string& key) const {
  auto found = index_.find(key);
  return found == index_.end() ? nullptr : &items_[found->second].value;
}

bool StateDict::erase(const std::string& key) {
  auto found = index_.find(key);
  if (found == index_.end()) {
    return false;
  }
  std::size_t position = found->second;
  items_.erase(items_.begin() + static_cast<std::ptrdiff_t>(position));
  index_.erase(found);
  for (auto& [name, i] : index_) {
    if (i > position) {
      --i;
    }
  }
  return true;
}

std::size_t StateDict::size() const { return items_.size(); }
StateDict::iterator StateDict::begin() { return items_.begin(); }
StateDict::iterator StateDict::end() { return items_.end(); }
StateDict::const_iterator StateDict::begin() const { return items_.begin(); }
StateDict::const_iterator StateDict::end() const { return items_.end(); }

// ---- StateList -------------------------------------------------------------------------------

StateList::StateList() = default;
StateList::StateList(std::initializer_list<StateValue> values) : items_(values) {}
StateList::StateList(const StateList&) = default;
StateList::StateList(StateList&&) noexcept = default;
StateList& StateList::operator=(const StateList&) = default;
StateList& StateList::operator=(StateList&&) noexcept = default;
StateList::~StateList() = default;

void StateList::push_back(StateValue value) { items_.push_back(std::move(value)); }
StateValue& StateList::operator[](std::size_t i) { return items_.at(i); }
const StateValue& StateList::operator[](std::size_t i) const { return items_.at(i); }
std::size_t StateList::size() const { return items_.size(); }
std::vector<StateValue>::iterator StateList::begin() { return items_.begin(); }
std::vector<StateValue>::iterator StateList::end() { return items_.end(); }
std::vector<StateValue>::const_iterator StateList::begin() const { return items_.begin(); }
std::vector<StateValue>::const_iterator StateList::end() const { return items_.end(); }

// ---- StateValue ------------------------------------------------------------------------------

namespace {

bool is_string_keyed_dict(const c10::IValue& value) {
  return value.isGenericDict() &&
         value.toGenericDict().keyType()->kind() == c10::TypeKind::StringType;
}

}  // namespace

StateValue::StateValue() : node_(c10::IValue()) {}

StateValue::StateValue(c10::IValue value) {
  if (value.isTensor()) {
    node_ = value.toTensor();
  } else if (is_string_keyed_dict(value)) {
    StateDict dict;
    for (const auto& entry : value.toGenericDict()) {
      dict.insert(entry.key().toStringRef(), StateValue(entry.value()));
    }
    node_ = std::move(dict);
  } else if (value.isList()) {
    StateList list;
    for (const c10::IValue& element : value.toListRef()) {
      list.push_back(StateValue(element));
    }
    node_ = std::move(list);
  } else {
    node_ = std::move(value);
  }
}

StateValue::StateValue(at::Tensor tensor) : node_(std::move(tensor)) {}
StateValue::StateValue(ShardedTensor tensor) : node_(std::move(tensor)) {}
StateValue::StateValue(StateDict dict) : node_(std::move(dict)) {}
StateValue::StateValue(StateList list) : node_(std::move(list)) {}
StateValue::StateValue(std::shared_ptr<Stateful> stateful) : node_(std::move(stateful)) {
  if (!std::get<std::shared_ptr<Stateful>>(node_)) {
    throw CheckpointError(
        ErrorKind::kUsage,
        "a Stateful value must not be null: give a std::shared_ptr that holds the object");
  }
}

namespace {

template <typename T, typename Variant>
auto& get_or_throw(Variant& node, const char* wanted, const char* actual) {
  auto* value = std::get_if<T>(&node);
  if (value == nullptr) {
    throw CheckpointError(ErrorKind::kUsage, std::string("state dict value is a ") + actual +
                                                 ", not a " + wanted +
                                                 "; check its kind() before reading it as one");
  }
  return *value;
}

}  // namespace

const c10::IValue& StateValue::value() const {
  return get_or_throw<c10::IValue>(node_, "value", kind_name());
}
const at::Tensor& StateValue::tensor() const {
  return get_or_throw<at::Tensor>(node_, "tensor", kind_name());
}
const ShardedTensor& StateValue::sharded_tensor() const {
  return get_or_throw<ShardedTensor>(node_, "sharded tensor", kind_name());
}
StateDict& StateValue::dict() { return get_or_throw<StateDict>(node_, "dict", kind_name()); }
const StateDict& StateValue::dict() const {
  return get_or_throw<StateDict>(node_, "dict", kind_name());
}
StateList& StateValue::list() { return get_or_throw<StateList>(node_, "list", kind_name()); }
const StateList& StateValue::list() const {
  return get_or_throw<StateList>(node_, "list", kind_name());
}
const std::shared_ptr<Stateful>& StateValue::stateful() const {
  return get_or_throw<std::shared_ptr<Stateful>>(node_, "Stateful", kind_name());
}

const char* StateValue::kind_name() const {
  switch (kind()) {
    case Kind::kValue:
      return "value";
    case Kind::kTensor:
      return "tensor";
    case Kind::kShardedTensor:
      return "sharded tensor";
    case Kind::kDict:
      return "dict";
    case Kind::kList:
      return "list";
    case Kind::kStateful:
      return "Stateful";
  }
  return "?";
}

}  // namespace dcpp
