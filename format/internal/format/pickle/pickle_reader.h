#pragma once
// dcpp's restricted unpickler: a pickle VM that builds a small tree of plain data and never calls
// anything.
//
// Python's `pickle.load` imports every global a pickle names and calls whatever REDUCE and NEWOBJ
// point at, so a crafted `.metadata` runs code. This VM only records: a global is a (module, name)
// pair, and NEWOBJ, REDUCE, BUILD and BINPERSID produce `PyObject`s that describe the call
// (callable, arguments, state) for the codecs to interpret. Globals must pass the caller's
// allowlist; those that run code when Python unpickles them (`runs_code_when_unpickled`) are
// refused whatever the allowlist says.
//
// Hostile input: every length is checked against the bytes left, memo indices are bounded by the
// input size, stack pops check the current MARK's fence, containers are
// type-checked before they are mutated, integers are bounded (kMaxBigIntBytes). Memory is bounded
// by a small multiple of the input size. Any violation is a CheckpointError naming the source, the
// byte offset and the opcode.

#include "format/pickle/node_arena.h"
#include "format/pickle/pickle_writer.h"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace dcpp::detail {

enum class PyKind : uint8_t {
  kNone,
  kBool,
  kInt,
  kBigInt,  // an int beyond int64: `text` holds its little-endian two's complement bytes
  kFloat,
  kStr,
  kBytes,
  kTuple,
  kList,
  kDict,
  kSet,
  kFrozenSet,
  kGlobal,      // a class or function named by GLOBAL/STACK_GLOBAL: `text` (the module), `name()`
  kNewObj,      // cls.__new__(cls, *args): `callable()`, `args()`, `state()` (BUILD; may be null)
  kReduce,      // callable(*args): same fields
  kPersistent,  // BINPERSID: `pid()`
};

struct PyObject;

/// The items of a node (see PyObject::items): a read-only view of pointers held in storage its
/// `Unpickled` owns, so that a tree of millions of small tuples costs no allocation per tuple.
class PyItems {
 public:
  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  PyObject* operator[](std::size_t i) const { return data_[i]; }
  PyObject* const* begin() const { return data_; }
  PyObject* const* end() const { return data_ + size_; }

 private:
  friend class PickleVm;
  PyObject** data_ = nullptr;
  uint32_t size_ = 0;
  uint32_t capacity_ = 0;
};

/// One node of an unpickled tree. Owned by the `Unpickled` that produced it; nodes may be shared
/// (memo; equal ints are one node) and, in hostile input, form cycles: consumers must bound their
/// recursion. `text` and `name` view the pickle's own bytes, which must outlive the tree.
struct PyObject {
  PyKind kind = PyKind::kNone;
  bool bool_value = false;
  /// A dict or list a ContainerStream adopted: its items went to the stream, not into `items`.
  bool streamed = false;
  /// The unpickler's own: which of its arenas holds the node.
  uint32_t region = 0;
  union {
    int64_t int_value = 0;
    double float_value;
  };
  std::string_view text;  // kStr, kBytes: the bytes; kBigInt: see PyKind; kGlobal: the module
  /// kTuple, kList, kSet, kFrozenSet: the items. kDict: keys and values interleaved, in insertion
  /// order. kNewObj, kReduce: {callable, args tuple, state or nullptr, list items or nullptr, dict
  /// items or nullptr} (APPENDS and SETITEMS on the object: a list or dict subclass's items, such
  /// as a collections.defaultdict's). kPersistent: {pid}. kGlobal: {its name, a kStr}.
  PyItems items;

  /// kGlobal: the name (module.name); empty for other kinds.
  std::string_view name() const {
    return kind == PyKind::kGlobal && items.size() == 1 ? items[0]->text : std::string_view();
  }

  std::size_t dict_size() const { return items.size() / 2; }
  const PyObject& key(std::size_t i) const { return *items[2 * i]; }
  const PyObject& value(std::size_t i) const { return *items[2 * i + 1]; }
  const PyObject& callable() const { return *items[0]; }
  const PyObject& args() const { return *items[1]; }
  const PyObject* state() const { return items[2]; }
  const PyObject* list_items() const { return items[3]; }
  const PyObject* dict_items() const { return items[4]; }
  /// True for a made object (kNewObj, kReduce) on which the pickle sets more than its call: a
  /// state, list items or dict items.
  bool has_more_than_call() const {
    return (kind == PyKind::kNewObj || kind == PyKind::kReduce) &&
           (items[2] != nullptr || items[3] != nullptr || items[4] != nullptr);
  }
  const PyObject& pid() const { return *items[0]; }

  bool is_global(std::string_view module, std::string_view global_name) const {
    return kind == PyKind::kGlobal && text == module && name() == global_name;
  }
  /// True for a NEWOBJ or REDUCE whose callable is the global `module.name`.
  bool is_instance_of(std::string_view module, std::string_view global_name) const {
    return (kind == PyKind::kNewObj || kind == PyKind::kReduce) &&
           callable().is_global(module, global_name);
  }
  /// For a dict with str keys: the value of `key`, or nullptr (the last one if repeated).
  const PyObject* find(std::string_view key) const;
};

/// A short description for error messages: "int", "str", "global torch.Size",
/// "object torch.Size(...)".
std::string describe(const PyObject& object);

/// `text` (from a pickle) made fit for an error message: control characters, NUL and DEL as \xHH,
/// so that a hostile name can neither cut the message short (what() is a C string) nor drive the
/// terminal it is printed on. Other bytes, UTF-8 included, are kept.
std::string printable(std::string_view text);

/// The largest int a pickle may hold, in bytes of two's complement (LONG1/LONG4): some 4900
/// decimal digits, beyond Python's own default limit for printing one (4300).
inline constexpr uint64_t kMaxBigIntBytes = 2048;

/// True for a global that runs code, commands or imports when Python unpickles a call of it or
/// merely looks it up for a later call (os.system, builtins.eval, subprocess.*, getattr, ...): a
/// pickle naming one is made to attack whoever loads it with Python. dcpp never calls anything, so
/// its own safety does not rest on this list; it refuses such checkpoints rather than pass their
/// values on.
bool runs_code_when_unpickled(std::string_view module, std::string_view name);

/// Decides whether a global may appear in the pickle.
using GlobalAllowlist = std::function<bool(std::string_view module, std::string_view name)>;

/// The result of `unpickle`: owns every node and every node's items.
class Unpickled {
 public:
  const PyObject& root() const { return *root_; }
  /// Number of nodes built and kept (for tests of the memory bounds).
  std::size_t node_count() const { return arena_.node_count(); }
  /// Bytes of nodes and items storage held (for tests and benchmarks of the memory bounds).
  std::size_t bytes_held() const { return arena_.bytes_held(); }

 private:
  friend class PickleVm;
  NodeArena arena_;
  const PyObject* root_ = nullptr;
};

/// Takes the items of chosen dicts and lists as the pickle sets them, instead of the tree keeping
/// them, so that a large pickle (a 10,000-rank `.metadata`) is never whole in memory. The items
/// of one batch (MARK ... SETITEMS or APPENDS on an adopted container) are built apart, handed to
/// take(), then freed; memo entries the pickle reads back later are kept. A batch must leave what
/// was built before it unchanged: otherwise the VM throws StreamAbandoned.
class ContainerStream {
 public:
  virtual ~ContainerStream() = default;
  /// Asked at each EMPTY_DICT and EMPTY_LIST: true to stream the items of `container` (new and
  /// empty, not yet on the stack). `stack` holds the values below it, `marks` the stack positions
  /// of the open MARKs.
  virtual bool adopt(const PyObject& container, const std::vector<PyObject*>& stack,
                     const std::vector<std::size_t>& marks) = 0;
  /// `count` items set on an adopted container (a dict's keys and values interleaved). They, and
  /// the nodes only they reach, may be freed once the call returns; their `text` views stay valid.
  virtual void take(const PyObject& container, PyObject* const* items, std::size_t count) = 0;
};

/// Thrown when a pickle's structure does not allow streaming it (a batch changes an object made
/// before it, a batch's MARK is closed by another opcode), by the VM or by a ContainerStream: the
/// caller unpickles it again without one. Not an error in the pickle.
class StreamAbandoned : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Runs the restricted VM over `bytes` (protocols 2 to 5; trailing bytes after STOP are ignored).
/// `collections.OrderedDict()` (REDUCE with no arguments) is built as a plain dict so that
/// SETITEMS may fill it, as Python does. Throws CheckpointError (kCorrupt) naming `source` on any
/// malformed input or unsupported opcode (with its byte offset), and on a global refused by
/// `allow`, which it names ("refers to the Python global 'os.system'") and explains as a refusal,
/// not as malformed bytes. The tree views `bytes` (strings, globals): keep them while it is used.
/// With a `stream`, the containers it adopts stay empty in the tree (see ContainerStream).
Unpickled unpickle(std::string_view bytes, const GlobalAllowlist& allow, std::string_view source,
                   ContainerStream* stream = nullptr);
/// A temporary string would be gone before its tree is read: refused at compile time.
Unpickled unpickle(std::string&& bytes, const GlobalAllowlist& allow, std::string_view source,
                   ContainerStream* stream = nullptr) = delete;

}  // namespace dcpp::detail
