#pragma once
// State dict values as JSON, for the command line's machine-readable output.

#include "common/tensor_stats.h"

#include <dcpp/state_dict/flatten.h>
#include <dcpp/state_dict/state_dict.h>

#include <nlohmann/json.hpp>

namespace dcpp::tools {

/// None -> null, bool, int, float (NaN and infinities -> {"__float__": "nan" | "inf" | "-inf"}),
/// complex -> {"__complex__": [re, im]}, str, tuples and lists -> arrays, dicts of str or int keys
/// -> objects; a tensor inside a value -> "<tensor float32 [2, 3]>"; a Python object
/// (python_object.h): a numpy array -> "<numpy.ndarray <u4 [4]>", a numpy scalar ->
/// {"__numpy__": "<f8", "value": 1.5}, bytes -> {"__bytes__": "<hex>"}, a set ->
/// {"__set__": [...]} (or "__frozenset__"), a big int -> {"__int__": "<decimal>"}, a dict of other
/// keys -> {"__dict__": [[key, value], ...]}, a global -> {"__global__": "torch.bfloat16"}, a call
/// -> {"__call__" (REDUCE) or "__new__" (NEWOBJ): "module.Name", "args": [...], "state": ...}, a
/// Namespace -> {"__class__": "argparse.Namespace", <attribute>: ...}. For display: values that
/// differ (inside tensors, in a key's kind) may show alike; compare them with identical_values.
nlohmann::json to_json(const StateValue& value);
nlohmann::json to_json(const c10::IValue& value);

/// A path as an array of its keys (strings) and list indices (integers).
nlohmann::json to_json(const ObjectPath& path);

/// {"sum", "abs_sum", "min", "max", "mean", "nan", "inf"}: figures that are missing or not finite
/// are null.
nlohmann::json to_json(const TensorStats& stats);

/// The value JSON holds, as `to_json` writes it back the same: null -> None, bool, integers -> int
/// (above int64's range -> float), float, str, arrays -> lists, objects -> dicts with str keys.
c10::IValue from_json(const nlohmann::json& json);

}  // namespace dcpp::tools
