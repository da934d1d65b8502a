#pragma once
// Python objects in value pickles (docs/megatron.md, "Values"), read as data, never by running
// them, and written back so that Python reads the same values: numpy arrays with their dtypes, the
// bytes inside them and outside (protocol 2's `_codecs.encode(str, 'latin1')`), sets,
// argparse.Namespace (Megatron's `args`) decoded into attributes; any other global or call of one
// kept as the PythonObject its pickle describes (<dcpp/state_dict/python_object.h>).

#include "format/pickle/pickle_reader.h"
#include "format/pickle/pickle_writer.h"

#include <dcpp/state_dict/python_object.h>

#include <ATen/core/ivalue.h>
#include <c10/core/ScalarType.h>

#include <functional>
#include <optional>
#include <string_view>

namespace dcpp::detail {

/// The value of a global, REDUCE or NEWOBJ node (nullopt for any other node), converting what it
/// holds with `convert`: a decoded object, or the PythonObject of the global or call. Throws
/// CheckpointError (kCorrupt, naming `what`) for one that is malformed: an array whose bytes do not
/// fill its shape, bytes with a character beyond latin1. (An array dcpp cannot hold as a tensor,
/// big-endian, structured or of objects, is kept as its calls.)
std::optional<c10::IValue> decode_python_object(
    const PyObject& object, const std::function<c10::IValue(const PyObject&)>& convert,
    std::string_view what);

/// When `value` holds a PythonObject, pushes its pickle (what Python writes for the object,
/// protocol 2; a kept call as it was read) onto the writer's stack, what it holds through `put`,
/// and returns true; false for any other value. Throws CheckpointError (kUsage) for a decoded
/// object that lacks its attributes.
bool put_python_object(PickleWriter& writer, const c10::IValue& value,
                       const std::function<void(const c10::IValue&)>& put);

/// The torch dtype holding numpy's `code` ("f4", "u2"; no byte order), or nullopt.
std::optional<at::ScalarType> torch_dtype_of_numpy(std::string_view code);

}  // namespace dcpp::detail
