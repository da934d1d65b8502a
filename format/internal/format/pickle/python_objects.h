#pragma once
// Python objects other than PyTorch's that checkpoints hold, Megatron-Core's payloads first
// (docs/megatron.md, "Values"): numpy arrays with their dtypes (numpy RNG states), the bytes
// inside them (protocol 2's `_codecs.encode(str, 'latin1')`) and `argparse.Namespace` (Megatron's
// `args`), read as data, never by running them, and written back so Python reads the same values.
//
// As dcpp values they are PythonObjects (<dcpp/state_dict/python_object.h>): "numpy.ndarray"
// {array, dtype} and "argparse.Namespace" {<attribute>...}.

#include "format/pickle/pickle_reader.h"
#include "format/pickle/pickle_writer.h"

#include <dcpp/state_dict/python_object.h>

#include <ATen/core/ivalue.h>

#include <functional>
#include <optional>
#include <string_view>

namespace dcpp::detail {

/// The globals these objects name: `numpy.core.multiarray._reconstruct` (or numpy 2's
/// `numpy._core.multiarray`), `numpy.ndarray`, `numpy.dtype`, `_codecs.encode`,
/// `argparse.Namespace`.
bool allow_python_object_global(std::string_view module, std::string_view name);

/// The value of `object` when it is one of these objects, converting what it holds (a
/// Namespace's attributes) with `convert`; nullopt for any other object. Throws CheckpointError
/// (kCorrupt, naming `what`) for one that is malformed: an array whose bytes do not fill its
/// shape, an unknown or big-endian multi-byte dtype, an object array.
std::optional<c10::IValue> decode_python_object(
    const PyObject& object, const std::function<c10::IValue(const PyObject&)>& convert,
    std::string_view what);

/// When `value` holds a PythonObject of one of these classes, pushes its pickle (what Python writes
/// for the object, protocol 2) onto the writer's stack, each attribute through `put`, and returns
/// true; false for any other value.
bool put_python_object(PickleWriter& writer, const c10::IValue& value,
                       const std::function<void(const c10::IValue&)>& put);

}  // namespace dcpp::detail
