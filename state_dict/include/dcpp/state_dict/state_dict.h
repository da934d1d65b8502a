#pragma once
// The state dict: a nested, insertion-ordered tree of named values, as DCP's `STATE_DICT_TYPE`.

#include <dcpp/core/export.h>
#include <dcpp/state_dict/sharded_tensor.h>

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>

#include <cstddef>
#include <memory>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <variant>
#include <vector>

namespace dcpp {

class Stateful;
class StateValue;

/// An insertion-ordered map from string keys to values; keys are unique. Value semantics: copying
/// a StateDict copies the tree, while tensors in it keep sharing storage (as tensors do).
class DCPP_API StateDict {
 public:
  struct Item;
  using iterator = std::vector<Item>::iterator;
  using const_iterator = std::vector<Item>::const_iterator;

  StateDict();
  StateDict(const StateDict&);
  StateDict(StateDict&&) noexcept;
  StateDict& operator=(const StateDict&);
  StateDict& operator=(StateDict&&) noexcept;
  ~StateDict();

  /// Adds `key` at the end. Throws CheckpointError naming the key when it is already present (as
  /// `torch::OrderedDict::insert` does); the dict is then unchanged.
  StateValue& insert(const std::string& key, StateValue value);
  /// Adds `key` at the end, or replaces its value in place (keeping its position) if present.
  StateValue& insert_or_assign(const std::string& key, StateValue value);
  /// The value of `key`, default-inserted (None) at the end when absent.
  StateValue& operator[](const std::string& key);
  /// Throws CheckpointError naming the key when absent.
  StateValue& at(const std::string& key);
  const StateValue& at(const std::string& key) const;
  StateValue* find(const std::string& key);
  const StateValue* find(const std::string& key) const;
  bool contains(const std::string& key) const { return find(key) != nullptr; }
  /// Removes `key`; returns whether it was present. Later items keep their order.
  bool erase(const std::string& key);

  std::size_t size() const;
  bool empty() const { return size() == 0; }
  iterator begin();
  iterator end();
  const_iterator begin() const;
  const_iterator end() const;

 private:
  std::vector<Item> items_;
  std::unordered_map<std::string, std::size_t> index_;
};

/// A list of values. DCP flattens a list into its elements when it holds a tensor or (through
/// nested lists) a dict; otherwise the whole list is one value, saved as bytes.
/// A list holding one list is `StateList{StateValue(inner)}`: `StateList{inner}` copies `inner`
/// with some compilers (Clang) and nests it with others (GCC, after CWG 2137).
class DCPP_API StateList {
 public:
  StateList();
  StateList(std::initializer_list<StateValue> values);
  StateList(const StateList&);
  StateList(StateList&&) noexcept;
  StateList& operator=(const StateList&);
  StateList& operator=(StateList&&) noexcept;
  ~StateList();

  void push_back(StateValue value);
  StateValue& operator[](std::size_t i);
  const StateValue& operator[](std::size_t i) const;
  std::size_t size() const;
  bool empty() const { return size() == 0; }
  std::vector<StateValue>::iterator begin();
  std::vector<StateValue>::iterator end();
  std::vector<StateValue>::const_iterator begin() const;
  std::vector<StateValue>::const_iterator end() const;

 private:
  std::vector<StateValue> items_;
};

/// One node of a state dict. A non-tensor leaf is a `c10::IValue` holding None, bool, int, float,
/// string, or a tuple (tuples are always leaves, as in DCP) or list of those. Constructing from an
/// IValue sorts it into the right kind: a tensor becomes a tensor, a dict with string keys a
/// StateDict, a list a StateList; anything else stays a leaf.
class DCPP_API StateValue {
 public:
  enum class Kind { kValue, kTensor, kShardedTensor, kDict, kList, kStateful };

  StateValue();                                    // None
  StateValue(c10::IValue value);                   // NOLINT(google-explicit-constructor)
  StateValue(at::Tensor tensor);                   // NOLINT
  StateValue(ShardedTensor tensor);                // NOLINT
  StateValue(StateDict dict);                      // NOLINT
  StateValue(StateList list);                      // NOLINT
  StateValue(std::shared_ptr<Stateful> stateful);  // NOLINT
  /// Any Stateful subclass (include <dcpp/state_dict/stateful.h> to define one).
  template <typename T, typename = std::enable_if_t<std::is_base_of_v<Stateful, T>>>
  StateValue(std::shared_ptr<T> stateful)  // NOLINT
      : StateValue(std::shared_ptr<Stateful>(std::move(stateful))) {}
  StateValue(const char* s) : StateValue(c10::IValue(std::string(s))) {}  // NOLINT
  StateValue(std::string s) : StateValue(c10::IValue(std::move(s))) {}    // NOLINT
  /// bool stays bool; other integers become int64, floating types double.
  template <typename T, typename = std::enable_if_t<std::is_arithmetic_v<T>>>
  StateValue(T v) : StateValue(to_ivalue(v)) {}  // NOLINT

  Kind kind() const { return static_cast<Kind>(node_.index()); }
  bool is_value() const { return kind() == Kind::kValue; }
  bool is_tensor() const { return kind() == Kind::kTensor; }
  bool is_sharded_tensor() const { return kind() == Kind::kShardedTensor; }
  bool is_dict() const { return kind() == Kind::kDict; }
  bool is_list() const { return kind() == Kind::kList; }
  bool is_stateful() const { return kind() == Kind::kStateful; }

  /// Accessors throw CheckpointError when the value is of another kind.
  const c10::IValue& value() const;
  const at::Tensor& tensor() const;
  const ShardedTensor& sharded_tensor() const;
  StateDict& dict();
  const StateDict& dict() const;
  StateList& list();
  const StateList& list() const;
  const std::shared_ptr<Stateful>& stateful() const;

  /// "tensor", "dict", ... for error messages.
  const char* kind_name() const;

 private:
  template <typename T>
  static c10::IValue to_ivalue(T v) {
    if constexpr (std::is_same_v<T, bool>) {
      return c10::IValue(v);
    } else if constexpr (std::is_integral_v<T>) {
      return c10::IValue(static_cast<int64_t>(v));
    } else {
      return c10::IValue(static_cast<double>(v));
    }
  }

  std::variant<c10::IValue, at::Tensor, ShardedTensor, StateDict, StateList,
               std::shared_ptr<Stateful>>
      node_;
};

struct DCPP_API StateDict::Item {
  std::string key;
  StateValue value;
};

}  // namespace dcpp
