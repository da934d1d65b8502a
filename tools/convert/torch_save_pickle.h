#pragma once
// data.pkl of `dcpp convert --to torch-save`: a nested state dict pickled (protocol 2) with only
// the opcodes that both Python's pickle and libtorch's own Unpickler (`torch::pickle_load`, every
// libtorch dcpp supports, 1.13 on) read. The library's codec ("format/pickle/torch_pickle.h")
// mirrors CPython's bytes instead, and some of those libtorch refuses: APPEND (CPython's choice for
// a batch of one list item), LONG1 of fewer than 8 bytes and the Python 2 name
// `__builtin__.complex`.
//
// Opcodes written: PROTO 2, NONE, NEWTRUE, NEWFALSE, BININT1, BININT2, BININT, LONG1 (always 8
// bytes), BINFLOAT, BINUNICODE, GLOBAL, EMPTY_TUPLE, TUPLE1/2/3, MARK ... TUPLE, EMPTY_LIST and
// MARK ... APPENDS, EMPTY_DICT and MARK ... SETITEMS, BINPERSID, REDUCE, STOP. Nothing is memoized:
// a state dict shares no objects.

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>

#include <string>
#include <vector>

namespace dcpp::tools {

/// Pickles `value`: None, bool, int, float, complex, str, tuple, list, dict with str or int keys,
/// and tensors (a whole value, whole_value.h, as what it holds). Each tensor is
/// `torch._utils._rebuild_tensor_v2` over a contiguous storage of exactly its elements (offset 0,
/// row-major strides, requires_grad kept, location 'cpu') keyed "0", "1", ... in the order met, and
/// is appended to `tensors` for the caller to store as `data/<key>`. Dtypes without a typed storage
/// class (complex32, float8) are written as Python writes them, `_rebuild_tensor_v3` over
/// `UntypedStorage`, which only Python reads. Throws CheckpointError for any other value, naming
/// its type (a Python object, python_object.h, its class: libtorch reads none).
std::string encode_torch_save_pickle(const c10::IValue& value, std::vector<at::Tensor>& tensors);

}  // namespace dcpp::tools
