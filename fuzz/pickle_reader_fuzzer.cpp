// Fuzz target: dcpp's restricted pickle VM (pickle_reader) and the two data.pkl decoders built on
// it (torch_pickle: a tensor item's rebuilt tensor, a bytes item's value).
//
// Contract checked: any bytes either decode or throw CheckpointError; the VM builds at most one
// node per input byte (plus its four constants) and never calls anything; a decoded tensor view
// lies inside its storage, so that `as_strided` over a storage of exactly `storage_numel` elements
// accepts it; a decoded value (every Python value: globals and calls kept as data) writes back and
// reads again as the identical value.

#include "format/pickle/pickle_reader.h"
#include "format/pickle/torch_pickle.h"

#include <dcpp/core/checkpoint_error.h>
#include <dcpp/state_dict/python_object.h>

#include <ATen/ATen.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>
#include <unordered_set>
#include <vector>

namespace {

// Named one by one: libtorch's headers declare Python's own ::PyObject.
using dcpp::detail::decode_tensor_pickle;
using dcpp::detail::decode_value_pickle;
using dcpp::detail::describe;
using dcpp::detail::encode_value_pickle;
using dcpp::detail::PyObject;
using dcpp::detail::TensorRef;
using dcpp::detail::unpickle;
using dcpp::detail::Unpickled;

// Every global is let through, so that the VM's handling of REDUCE, NEWOBJ and BUILD on any
// callable is exercised; they are only recorded.
bool allow_any_global(std::string_view, std::string_view) { return true; }

// Visits each node reachable from the root once (nodes are shared through the memo and may form
// cycles), reading every field, so that ASan sees a dangling or uninitialised node.
std::size_t walk(const PyObject& root) {
  std::unordered_set<const PyObject*> seen{&root};
  std::vector<const PyObject*> pending{&root};
  std::size_t text_bytes = 0;
  while (!pending.empty()) {
    const PyObject* node = pending.back();
    pending.pop_back();
    text_bytes += describe(*node).size() + node->text.size() + node->name().size();
    for (const PyObject* item : node->items) {
      if (item != nullptr && seen.insert(item).second) pending.push_back(item);
    }
  }
  return text_bytes;
}

// What a bytes item's reader does with a tensor in a value, over a storage the fuzzer makes
// itself: a storage of exactly the elements data.pkl claims, viewed as data.pkl says.
at::Tensor view_over_storage(const TensorRef& ref) {
  if (ref.storage_numel > (int64_t{1} << 16)) {
    throw dcpp::CheckpointError(dcpp::ErrorKind::kCorrupt,
                                "fuzz: storage of more than 65536 elements not allocated");
  }
  const at::Tensor storage = at::empty({ref.storage_numel}, at::TensorOptions().dtype(ref.dtype));
  return storage.as_strided(ref.sizes, ref.strides, ref.storage_offset);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  try {
    const Unpickled tree = unpickle(bytes, allow_any_global, "fuzz input");
    if (tree.node_count() > size + 4) {
      std::abort();  // the memory bound of pickle_reader.h is broken
    }
    walk(tree.root());
  } catch (const dcpp::CheckpointError&) {
  }
  try {
    const TensorRef ref = decode_tensor_pickle(bytes, "fuzz input");
    if (ref.storage_numel <= (int64_t{1} << 16)) view_over_storage(ref);
  } catch (const dcpp::CheckpointError&) {
  }
  c10::IValue value;
  try {
    value = decode_value_pickle(bytes, view_over_storage, "fuzz input");
  } catch (const dcpp::CheckpointError&) {
    return 0;
  }
  // What was read writes back (as torch.save would), and reads again as the same value.
  std::vector<at::Tensor> tensors;
  std::string again;
  try {
    again = encode_value_pickle(value, tensors);
  } catch (const dcpp::CheckpointError& error) {
    if (error.kind() != dcpp::ErrorKind::kUsage) std::abort();
    return 0;  // a dict of float keys, a dtype Python cannot name: a refusal, never a crash
  }
  const c10::IValue back = decode_value_pickle(
      again, [&](const TensorRef& ref) { return tensors.at(std::stoul(ref.storage_key)); },
      "fuzz input written back");
  if (!dcpp::identical_values(value, back)) std::abort();
  return 0;
}
