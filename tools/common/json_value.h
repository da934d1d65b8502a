#pragma once
// State dict values as JSON, for the command line's machine-readable output.

#include "common/tensor_stats.h"

#include <dcpp/state_dict/flatten.h>
#include <dcpp/state_dict/state_dict.h>

#include <nlohmann/json.hpp>

namespace dcpp::tools {

/// None -> null, bool, int, float (NaN and infinities -> null, as JSON has none), str, tuples and
/// lists -> arrays, dicts -> objects; a tensor inside a value -> "<tensor float32 [2, 3]>"; a
/// Python object (python_object.h): a numpy array -> "<numpy.ndarray <u4 [4]>", another ->
/// {"__class__": "argparse.Namespace", <attribute>: ...}.
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
