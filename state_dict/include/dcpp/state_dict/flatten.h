#pragma once
// Flattening a nested state dict to dotted keys and back, with DCP 2.4+'s rules.

#include <dcpp/core/export.h>
#include <dcpp/state_dict/state_dict.h>

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

namespace dcpp {

/// One step of an object path: a dict key or a list index (DCP's `OBJ_PATH` items).
using PathElement = std::variant<std::string, int64_t>;
using ObjectPath = std::vector<PathElement>;

/// "a.0.b" for ("a", 0, "b"): DCP's `".".join(map(str, path))`.
DCPP_API std::string join_path(const ObjectPath& path);

/// A leaf of a flattened state dict. `value` points into the tree that was flattened and stays
/// valid while that tree is neither destroyed nor restructured.
struct DCPP_API FlatEntry {
  std::string key;
  ObjectPath path;
  StateValue* value;
};

/// Flattens `state_dict` as `torch.distributed.checkpoint` 2.4+ does: dicts are always descended
/// into (an empty dict yields nothing), lists only when they hold a tensor or, at any depth through
/// lists, a dict; other lists and every tuple are single leaves. Stateful objects must have been
/// resolved to their state dicts before. Throws CheckpointError naming the key when two paths join
/// to the same dotted key (e.g. {"a.b": x, "a": {"b": y}}) or a Stateful is met.
DCPP_API std::vector<FlatEntry> flatten_state_dict(StateDict& state_dict);

/// Stores `value` at `path` in `root`, creating dicts (for string steps) and lists (for integer
/// steps, padded with None) on the way: DCP's `set_element`. Throws CheckpointError when the path
/// runs into a value of another kind.
DCPP_API void set_element(StateDict& root, const ObjectPath& path, StateValue value);

/// The value at `path`, or nullptr.
DCPP_API StateValue* find_element(StateDict& root, const ObjectPath& path);

}  // namespace dcpp
