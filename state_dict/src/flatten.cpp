#include <dcpp/state_dict/flatten.h>

#include <dcpp/core/checkpoint_error.h>

#include <unordered_set>

namespace dcpp {

std::string join_path(const ObjectPath& path) {
  std::string joined;
  for (std::size_t i = 0; i < path.size(); ++i) {
    if (i > 0) {
      joined += '.';
    }
    if (const auto* key = std::get_if<std::string>(&path[i])) {
      joined += *key;
    } else {
      joined += std::to_string(std::get<int64_t>(path[i]));
    }
  }
  return joined;
}

namespace {

// DCP's `_is_terminal` for lists: a list is one leaf unless it holds a tensor, a dict, or a list
// that is itself not a leaf.
bool is_terminal_list(const StateList& list) {
  for (const StateValue& entry : list) {
    switch (entry.kind()) {
      case StateValue::Kind::kTensor:
      case StateValue::Kind::kShardedTensor:
      case StateValue::Kind::kDict:
        return false;
      case StateValue::Kind::kList:
        if (!is_terminal_list(entry.list())) {
          return false;
        }
        break;
      default:
        break;
    }
  }
  return true;
}

class Flattener {
 public:
  std::vector<FlatEntry> entries;

  void visit(ObjectPath& path, StateValue& value) {
    switch (value.kind()) {
      case StateValue::Kind::kDict:
        for (auto& item : value.dict()) {
          path.emplace_back(item.key);
          visit(path, item.value);
          path.pop_back();
        }
        return;
      case StateValue::Kind::kList:
        if (!is_terminal_list(value.list())) {
          int64_t index = 0;
          for (StateValue& element : value.list()) {
            path.emplace_back(index++);
            visit(path, element);
            path.pop_back();
          }
          return;
        }
        break;
      case StateValue::Kind::kStateful:
        throw CheckpointError(ErrorKind::kUsage,
                              "state dict key '" + join_path(path) +
                                  "' holds a Stateful object that was not resolved to its state "
                                  "dict; pass it to save()/load(), which call state_dict()");
      default:
        break;
    }
    std::string key = join_path(path);
    if (!keys_.insert(key).second) {
      throw CheckpointError(ErrorKind::kUsage,
                            "two state dict entries flatten to the same key '" + key +
                                "'; rename one of them (dots in keys join with nesting)");
    }
    entries.push_back(FlatEntry{std::move(key), path, &value});
  }

 private:
  std::unordered_set<std::string> keys_;
};

}  // namespace

std::vector<FlatEntry> flatten_state_dict(StateDict& state_dict) {
  Flattener flattener;
  ObjectPath path;
  for (auto& item : state_dict) {
    path.assign(1, item.key);
    flattener.visit(path, item.value);
  }
  return std::move(flattener.entries);
}

namespace {

[[noreturn]] void throw_path_conflict(const ObjectPath& path, std::size_t depth,
                                      const StateValue& found) {
  ObjectPath prefix(path.begin(), path.begin() + static_cast<std::ptrdiff_t>(depth));
  throw CheckpointError(ErrorKind::kIncompatible,
                        "cannot store key '" + join_path(path) + "': '" + join_path(prefix) +
                            "' is a " + found.kind_name() + ", not a " +
                            (std::holds_alternative<std::string>(path[depth]) ? "dict" : "list"));
}

StateValue& child_of(StateValue& container, const ObjectPath& path, std::size_t depth,
                     bool create) {
  const PathElement& step = path[depth];
  if (const auto* key = std::get_if<std::string>(&step)) {
    if (!container.is_dict()) {
      throw_path_conflict(path, depth, container);
    }
    return container.dict()[*key];
  }
  const int64_t index = std::get<int64_t>(step);
  if (!container.is_list() || index < 0) {
    throw_path_conflict(path, depth, container);
  }
  StateList& list = container.list();
  while (create && list.size() <= static_cast<std::size_t>(index)) {
    list.push_back(StateValue());
  }
  return list[static_cast<std::size_t>(index)];
}

bool is_none(const StateValue& value) { return value.is_value() && value.value().isNone(); }

}  // namespace

void set_element(StateDict& root, const ObjectPath& path, StateValue value) {
  if (path.empty() || !std::holds_alternative<std::string>(path.front())) {
    throw CheckpointError(ErrorKind::kUsage, "cannot store key '" + join_path(path) +
                                                 "': a path must start with a string key");
  }
  StateValue* current = &root[std::get<std::string>(path.front())];
  for (std::size_t depth = 1; depth < path.size(); ++depth) {
    if (is_none(*current)) {
      *current = std::holds_alternative<std::string>(path[depth]) ? StateValue(StateDict())
                                                                  : StateValue(StateList());
    }
    current = &child_of(*current, path, depth, /*create=*/true);
  }
  *current = std::move(value);
}

StateValue* find_element(StateDict& root, const ObjectPath& path) {
  if (path.empty() || !std::holds_alternative<std::string>(path.front())) {
    return nullptr;
  }
  StateValue* current = root.find(std::get<std::string>(path.front()));
  for (std::size_t depth = 1; current != nullptr && depth < path.size(); ++depth) {
    const PathElement& step = path[depth];
    if (const auto* key = std::get_if<std::string>(&step)) {
      current = current->is_dict() ? current->dict().find(*key) : nullptr;
    } else {
      const int64_t index = std::get<int64_t>(step);
      current = current->is_list() && index >= 0 &&
                        static_cast<std::size_t>(index) < current->list().size()
                    ? &current->list()[static_cast<std::size_t>(index)]
                    : nullptr;
    }
  }
  return current;
}

}  // namespace dcpp
