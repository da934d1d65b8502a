#include "format/pickle/pickle_reader.h"

#include "memo_gets.h"

#include <dcpp/core/checkpoint_error.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstring>
#include <limits>
#include <unordered_map>

namespace dcpp::detail {

const PyObject* PyObject::find(std::string_view key) const {
  if (kind != PyKind::kDict) {
    return nullptr;
  }
  const PyObject* found = nullptr;
  for (std::size_t i = 0; i < dict_size(); ++i) {
    const PyObject& k = this->key(i);
    if (k.kind == PyKind::kStr && k.text == key) {
      found = &value(i);
    }
  }
  return found;
}

bool runs_code_when_unpickled(std::string_view module, std::string_view name) {
  // Modules every global of which runs commands, code or imports, touches files or processes.
  // clang-format off
  static constexpr std::string_view kModules[] = {
      "os", "posix", "nt", "subprocess", "sys", "importlib", "runpy", "pty", "shutil", "socket",
      "ctypes", "code", "codeop", "pdb", "bdb", "webbrowser", "multiprocessing", "asyncio",
      "pickle", "_pickle", "marshal", "shelve", "dill", "cloudpickle", "timeit", "profile",
      "cProfile", "trace", "doctest", "unittest", "pydoc", "platform", "threading", "_thread",
      "tempfile", "glob", "zipimport", "imp"};
  // clang-format on
  for (const std::string_view bad : kModules) {
    if (module == bad || (module.size() > bad.size() && module.substr(0, bad.size()) == bad &&
                          module[bad.size()] == '.')) {
      return true;
    }
  }
  // Builtins that evaluate, import, reach attributes (and so any method) or open files.
  static constexpr std::string_view kBuiltins[] = {
      "eval", "exec",  "compile",    "__import__", "getattr", "setattr", "delattr",
      "open", "input", "breakpoint", "globals",    "locals",  "vars",    "exit",
      "quit", "help",  "execfile",   "reload",     "file",    "apply"};
  if (module == "builtins" || module == "__builtin__") {
    for (const std::string_view bad : kBuiltins) {
      if (name == bad) return true;
    }
    return false;
  }
  // Single functions and classes elsewhere that call, load or write what they are given.
  static constexpr std::pair<std::string_view, std::string_view> kGlobals[] = {
      {"operator", "attrgetter"},
      {"operator", "methodcaller"},
      {"_operator", "attrgetter"},
      {"_operator", "methodcaller"},
      {"types", "FunctionType"},
      {"types", "CodeType"},
      {"types", "LambdaType"},
      {"types", "MethodType"},
      {"io", "open"},
      {"_io", "open"},
      {"io", "FileIO"},
      {"_io", "FileIO"},
      {"io", "open_code"},
      {"_io", "open_code"},
      {"torch", "load"},
      {"torch.serialization", "load"},
      {"torch.jit", "load"},
      {"torch.hub", "load"},
      {"numpy", "load"},
      {"numpy.testing._private.utils", "runstring"},
      {"numpy.lib.npyio", "load"},
      {"functools", "reduce"}};
  for (const auto& [bad_module, bad_name] : kGlobals) {
    if (module == bad_module && name == bad_name) return true;
  }
  return false;
}

std::string printable(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte == 0x7f) {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\x%02x", byte);
      out += escaped;
    } else {
      out += c;
    }
  }
  return out;
}

std::string describe(const PyObject& object) {
  switch (object.kind) {
    case PyKind::kNone:
      return "None";
    case PyKind::kBool:
      return "bool";
    case PyKind::kInt:
      return "int";
    case PyKind::kBigInt:
      return "int beyond 64 bits";
    case PyKind::kFloat:
      return "float";
    case PyKind::kStr:
      return "str";
    case PyKind::kBytes:
      return "bytes";
    case PyKind::kTuple:
      return "tuple of " + std::to_string(object.items.size());
    case PyKind::kList:
      return "list";
    case PyKind::kDict:
      return "dict";
    case PyKind::kSet:
      return "set";
    case PyKind::kFrozenSet:
      return "frozenset";
    case PyKind::kGlobal:
      return "global " + std::string(object.text) + "." + std::string(object.name());
    case PyKind::kNewObj:
    case PyKind::kReduce: {
      const PyObject& callable = object.callable();
      if (callable.kind == PyKind::kGlobal) {
        return "object " + std::string(callable.text) + "." + std::string(callable.name());
      }
      return "object";
    }
    case PyKind::kPersistent:
      return "persistent id";
  }
  return "object";
}

namespace {

/// Immutable nodes (ints, tuples) seen recently, by a hash of their value: sets of four, least
/// recently used out. Sized by the input (a small pickle pays for a few hundred bytes, a large one
/// for 128 KiB), so that values repeated across a large file (a .metadata's chunk offsets and
/// sizes, in an order that alternates between them) are one node each.
class SharedNodes {
 public:
  explicit SharedNodes(std::size_t input_size) {
    std::size_t sets = 16;
    shift_ = 60;
    while (sets < 4096 && sets * 256 < input_size) {
      sets *= 2;
      --shift_;
    }
    sets_.resize(sets);
  }

  /// The node `equal` accepts among those of `hash`, or nullptr.
  template <typename Equal>
  PyObject* find(uint64_t hash, const Equal& equal) {
    std::array<PyObject*, kWays>& set = sets_[hash >> shift_];
    for (std::size_t way = 0; way < kWays && set[way] != nullptr; ++way) {
      if (equal(*set[way])) {
        PyObject* found = set[way];
        std::move_backward(set.begin(), set.begin() + static_cast<std::ptrdiff_t>(way),
                           set.begin() + static_cast<std::ptrdiff_t>(way) + 1);
        set[0] = found;
        return found;
      }
    }
    return nullptr;
  }

  void insert(uint64_t hash, PyObject* node) {
    std::array<PyObject*, kWays>& set = sets_[hash >> shift_];
    std::move_backward(set.begin(), set.end() - 1, set.end());
    set[0] = node;
  }

 private:
  static constexpr std::size_t kWays = 4;
  std::vector<std::array<PyObject*, kWays>> sets_;
  int shift_ = 60;  // the hash's top bits pick the set: multiplying mixes into them
};

uint64_t mix(uint64_t hash, uint64_t value) { return (hash ^ value) * 0x9E3779B97F4A7C15u; }

}  // namespace

class PickleVm {
 public:
  PickleVm(std::string_view bytes, const GlobalAllowlist& allow, std::string_view source,
           ContainerStream* stream)
      : bytes_(bytes),
        allow_(allow),
        source_(source),
        stream_(stream),
        gets_(memo_gets(bytes)),
        memo_(gets_.size(), nullptr),
        ints_(bytes.size()),
        tuples_(bytes.size()) {}

  Unpickled run();

 private:
  [[noreturn]] void fail(const std::string& problem) const;
  /// Where new nodes go: the innermost streamed batch's arena, or the tree's.
  NodeArena& arena() {
    return regions_.empty() ? result_.arena_ : scratch_[regions_.size() - 1];
  }
  uint32_t region_id() const { return regions_.empty() ? 0 : regions_.back().id; }
  PyObject* make(PyKind kind);
  /// Makes room in `items` for `extra` more (doubling, so that a list filled one APPEND at a time
  /// costs amortised O(1) and at most twice its final size).
  void reserve_items(PyItems& items, std::size_t extra);
  /// A MARK over a streamed container opens a batch whose nodes go to an arena of their own.
  void begin_region();
  /// The batch's items were taken: keeps the memo entries read back later (copied into the
  /// enclosing arena), frees the rest.
  void end_region();
  /// `target` is about to change: inside a batch, it must have been made in it.
  void check_mutable(const PyObject* target);
  /// `node`, if region `from` made it, copied with what it reaches from there into the arena now
  /// current.
  PyObject* evacuate(PyObject* node, uint32_t from);
  [[noreturn]] void abandon_stream(const std::string& why) const;
  void push(PyObject* object) { stack_.push_back(object); }
  std::size_t fence() const { return marks_.empty() ? 0 : marks_.back(); }
  PyObject* pop();
  PyObject* top();
  /// Ends the current MARK: the index on the stack of its first item (the items run to the top).
  std::size_t pop_mark();
  /// Moves the stack's items from `first` on into `target`'s items, after those it has.
  void move_items_from(std::size_t first, PyObject* target);
  /// Sets `target`'s items to exactly `items`.
  void set_items(PyObject* target, std::initializer_list<PyObject*> items);
  void need(uint64_t n) const;
  uint8_t u8();
  uint64_t le(int n);
  std::string_view take(uint64_t n);
  std::string_view line();
  void memo_put(uint64_t index);
  void memo_get(uint64_t index);
  void global(std::string_view module, std::string_view name);
  [[noreturn]] void refuse_global(std::string_view module, std::string_view name,
                                  const char* why) const;
  PyObject* expect_container(PyObject* object, PyKind kind, const char* opcode_name);
  /// The list or dict `kind` that APPEND(S) or SETITEM(S) fill: `object` itself, or the items of a
  /// made object (created on first use).
  PyObject* items_of(PyObject* object, PyKind kind, const char* opcode_name);
  /// APPEND(S), SETITEM(S): the stack's items from `first` on go into the list or dict below them
  /// (`kind`), or to the stream if it adopted that container; a batch that closes ends there.
  void add_items(std::size_t first, PyKind kind, const char* opcode_name);
  void push_int(int64_t value);
  /// Replaces the stack's items from `first` on with a tuple of them.
  void push_tuple(std::size_t first);
  void long_bytes(uint64_t n);
  void step(uint8_t code);

  std::string_view bytes_;
  const GlobalAllowlist& allow_;
  std::string_view source_;
  std::size_t pos_ = 0;
  std::size_t op_pos_ = 0;
  uint8_t op_ = 0;
  ContainerStream* stream_;
  Unpickled result_;
  std::vector<PyObject*> stack_;
  std::vector<std::size_t> marks_;
  /// A streamed batch: opened by the MARK that made `marks` marks open; its nodes have `id`.
  struct Region {
    std::size_t marks;
    uint32_t id;
    std::vector<std::size_t> memo_puts;  // slots of entries it defined that a GET reads back
  };
  std::vector<Region> regions_;    // nested batches, innermost last
  std::vector<NodeArena> scratch_;  // [d]: the arena of regions_[d], kept for the next batch
  uint32_t next_region_id_ = 1;
  MemoGets gets_;               // memo indices a GET reads back: only those are kept
  std::vector<PyObject*> memo_;  // by gets_.slot(index); nullptr where not defined yet
  std::vector<bool> defined_;    // memo indices defined so far
  std::size_t memo_count_ = 0;  // defined entries: MEMOIZE's next index, as len(memo) in Python
  PyObject* none_ = nullptr;
  PyObject* true_ = nullptr;
  PyObject* false_ = nullptr;
  PyObject* empty_tuple_ = nullptr;
  /// Ints are immutable, so equal ones may be one node (a .metadata's offsets and sizes repeat a
  /// few values millions of times). Tuples are immutable too: equal small ones (the same item
  /// nodes) may be one node; a torch.Size pickles as two tuples.
  SharedNodes ints_;
  SharedNodes tuples_;
  bool stopped_ = false;
};

void PickleVm::fail(const std::string& problem) const {
  char opcode[32];
  if (op_ >= 0x20 && op_ < 0x7f) {
    std::snprintf(opcode, sizeof opcode, "0x%02x '%c'", op_, op_);
  } else {
    std::snprintf(opcode, sizeof opcode, "0x%02x", op_);
  }
  throw CheckpointError(ErrorKind::kCorrupt, std::string(source_) + ": malformed pickle at byte " +
                                                 std::to_string(op_pos_) + " (opcode " + opcode +
                                                 "): " + printable(problem));
}

PyObject* PickleVm::make(PyKind kind) {
  PyObject* object = arena().make_node();
  object->kind = kind;
  object->region = region_id();
  return object;
}

void PickleVm::reserve_items(PyItems& items, std::size_t extra) {
  const std::size_t needed = items.size_ + extra;
  if (needed <= items.capacity_) return;
  const std::size_t capacity = std::max(needed, 2 * std::size_t{items.capacity_});
  PyObject** data = arena().make_items(capacity);
  if (items.size_ > 0) std::memcpy(data, items.data_, items.size_ * sizeof(PyObject*));
  items.data_ = data;
  items.capacity_ = static_cast<uint32_t>(capacity);
}

void PickleVm::abandon_stream(const std::string& why) const {
  throw StreamAbandoned(std::string(source_) + ": pickle byte " + std::to_string(op_pos_) + ": " +
                        why);
}

void PickleVm::begin_region() {
  if (next_region_id_ == std::numeric_limits<uint32_t>::max()) {
    abandon_stream("more streamed batches than the VM counts");
  }
  regions_.push_back(Region{marks_.size(), next_region_id_++, {}});
  if (scratch_.size() < regions_.size()) scratch_.emplace_back();
}

void PickleVm::end_region() {
  Region region = std::move(regions_.back());
  regions_.pop_back();  // from here, arena() and region_id() are the enclosing ones
  for (const std::size_t slot : region.memo_puts) {
    PyObject*& entry = memo_[slot];
    if (entry->region != region.id) continue;  // put again since, or made before the batch
    entry = evacuate(entry, region.id);
    if (!regions_.empty()) regions_.back().memo_puts.push_back(slot);
  }
  scratch_[regions_.size()].reset();
}

void PickleVm::check_mutable(const PyObject* target) {
  if (!regions_.empty() && target->region != regions_.back().id) {
    abandon_stream("a streamed batch changes a " + describe(*target) + " made before it");
  }
}

PyObject* PickleVm::evacuate(PyObject* node, uint32_t from) {
  std::unordered_map<const PyObject*, PyObject*> copies;  // cycles and shared nodes: copied once
  std::vector<PyObject*> unfinished;                      // copies whose items are the originals'
  auto copy_of = [&](PyObject* original) -> PyObject* {
    if (original == nullptr || original->region != from) return original;
    auto [copy, fresh] = copies.try_emplace(original, nullptr);
    if (fresh) {
      PyObject* made = make(original->kind);
      const uint32_t region = made->region;
      *made = *original;
      made->region = region;
      made->items.capacity_ = made->items.size_;
      made->items.data_ = nullptr;
      if (made->items.size_ > 0) {
        made->items.data_ = arena().make_items(made->items.size_);
        std::memcpy(made->items.data_, original->items.data_,
                    made->items.size_ * sizeof(PyObject*));
      }
      copy->second = made;
      unfinished.push_back(made);
    }
    return copy->second;
  };
  PyObject* root = copy_of(node);
  while (!unfinished.empty()) {
    PyObject* made = unfinished.back();
    unfinished.pop_back();
    for (uint32_t i = 0; i < made->items.size_; ++i) {
      made->items.data_[i] = copy_of(made->items.data_[i]);
    }
  }
  return root;
}

PyObject* PickleVm::pop() {
  if (stack_.size() <= fence()) {
    fail("stack underflow");
  }
  PyObject* object = stack_.back();
  stack_.pop_back();
  return object;
}

PyObject* PickleVm::top() {
  if (stack_.size() <= fence()) {
    fail("stack underflow");
  }
  return stack_.back();
}

std::size_t PickleVm::pop_mark() {
  if (marks_.empty()) {
    fail("no MARK on the stack");
  }
  const std::size_t start = marks_.back();
  const bool closes_region = !regions_.empty() && regions_.back().marks == marks_.size();
  marks_.pop_back();
  if (closes_region && op_ != op::kSetItems && op_ != op::kAppends) {
    abandon_stream("a streamed batch's MARK is closed by an opcode other than SETITEMS or APPENDS");
  }
  return start;
}

void PickleVm::move_items_from(std::size_t first, PyObject* target) {
  const std::size_t n = stack_.size() - first;
  if (n > std::numeric_limits<uint32_t>::max() - std::size_t{target->items.size_}) {
    fail("a container of more than 2^32 items");
  }
  reserve_items(target->items, n);
  if (n > 0) {
    std::memcpy(target->items.data_ + target->items.size_, stack_.data() + first,
                n * sizeof(PyObject*));
  }
  target->items.size_ += static_cast<uint32_t>(n);
  stack_.resize(first);
}

void PickleVm::set_items(PyObject* target, std::initializer_list<PyObject*> items) {
  target->items.data_ = arena().make_items(items.size());
  std::copy(items.begin(), items.end(), target->items.data_);
  target->items.size_ = target->items.capacity_ = static_cast<uint32_t>(items.size());
}

void PickleVm::need(uint64_t n) const {
  if (n > bytes_.size() - pos_) {
    fail("truncated: needs " + std::to_string(n) + " more bytes, " +
         std::to_string(bytes_.size() - pos_) + " left");
  }
}

uint8_t PickleVm::u8() {
  need(1);
  return static_cast<uint8_t>(bytes_[pos_++]);
}

uint64_t PickleVm::le(int n) {
  need(static_cast<uint64_t>(n));
  uint64_t value = 0;
  for (int i = 0; i < n; ++i) {
    value |= static_cast<uint64_t>(static_cast<uint8_t>(bytes_[pos_ + i])) << (8 * i);
  }
  pos_ += static_cast<std::size_t>(n);
  return value;
}

std::string_view PickleVm::take(uint64_t n) {
  need(n);
  std::string_view view = bytes_.substr(pos_, static_cast<std::size_t>(n));
  pos_ += static_cast<std::size_t>(n);
  return view;
}

std::string_view PickleVm::line() {
  const std::size_t end = bytes_.find('\n', pos_);
  if (end == std::string_view::npos) {
    fail("truncated: unterminated line");
  }
  std::string_view view = bytes_.substr(pos_, end - pos_);
  pos_ = end + 1;
  return view;
}

void PickleVm::memo_put(uint64_t index) {
  PyObject* object = top();
  // A pickler numbers memo entries from 0, one per object it writes: an index beyond the input's
  // size is not from one, and would make the table huge.
  if (index >= bytes_.size()) {
    fail("memo index " + std::to_string(index) + " is beyond the pickle's size");
  }
  if (index >= defined_.size()) {
    defined_.resize(std::min(bytes_.size(), std::max<std::size_t>(index + 1, 2 * defined_.size())));
  }
  if (!defined_[index]) {
    defined_[index] = true;
    ++memo_count_;
  }
  if (gets_.contains(index)) {  // nothing reads the others back: not kept
    const std::size_t slot = gets_.slot(index);
    memo_[slot] = object;
    if (!regions_.empty()) regions_.back().memo_puts.push_back(slot);
  }
}

void PickleVm::memo_get(uint64_t index) {
  PyObject* entry = gets_.contains(index) ? memo_[gets_.slot(index)] : nullptr;
  if (entry == nullptr) {
    fail("memo entry " + std::to_string(index) + " is not defined");
  }
  if (entry->streamed) {
    // Its items are gone to the stream: a second place holding it would read it empty.
    abandon_stream("a streamed " + describe(*entry) + " is read back from the memo");
  }
  push(entry);
}

void PickleVm::refuse_global(std::string_view module, std::string_view name,
                             const char* why) const {
  // Not malformed: a well-formed pickle of something dcpp will not pass on.
  throw CheckpointError(ErrorKind::kCorrupt,
                        std::string(source_) + ": refers to the Python global '" +
                            printable(module) + "." + printable(name) + "' (pickle byte " +
                            std::to_string(op_pos_) + "), " + why);
}

void PickleVm::global(std::string_view module, std::string_view name) {
  if (runs_code_when_unpickled(module, name)) {
    refuse_global(module, name,
                  "which runs code, commands or imports when Python unpickles it: the checkpoint "
                  "is hostile or broken. dcpp decodes checkpoint data without running any of it, "
                  "and refuses to pass on a value that would run code in a Python program "
                  "loading it");
  }
  if (!allow_(module, name)) {
    refuse_global(
        module, name,
        "which dcpp does not load: dcpp decodes checkpoint data without running any of "
        "it, and knows only the classes and functions PyTorch's checkpoint files use. "
        "The checkpoint holds an object of another class (its writer's own, or one made "
        "to run code); save tensors, numbers, strings and lists or dicts of them instead");
  }
  PyObject* name_node = make(PyKind::kStr);
  name_node->text = name;
  PyObject* object = make(PyKind::kGlobal);
  object->text = module;
  set_items(object, {name_node});
  push(object);
}

PyObject* PickleVm::items_of(PyObject* object, PyKind kind, const char* opcode_name) {
  check_mutable(object);
  if (object->kind == PyKind::kNewObj || object->kind == PyKind::kReduce) {
    // A list or dict subclass: Python appends or sets the items on the object it made.
    PyObject*& items = object->items.data_[kind == PyKind::kList ? 3 : 4];
    if (items == nullptr) items = make(kind);
    return items;
  }
  return expect_container(object, kind, opcode_name);
}

PyObject* PickleVm::expect_container(PyObject* object, PyKind kind, const char* opcode_name) {
  if (object->kind != kind) {
    fail(std::string(opcode_name) + " on a " + describe(*object));
  }
  return object;
}

void PickleVm::add_items(std::size_t first, PyKind kind, const char* opcode_name) {
  PyObject* container = stack_[first - 1];
  if (container->streamed && container->kind == kind) {
    stream_->take(*container, stack_.data() + first, stack_.size() - first);
    stack_.resize(first);
    if (!regions_.empty() && regions_.back().marks > marks_.size()) end_region();
    return;
  }
  move_items_from(first, items_of(container, kind, opcode_name));
}

void PickleVm::push_int(int64_t value) {
  const uint64_t hash = mix(0, static_cast<uint64_t>(value));
  PyObject* node = ints_.find(hash, [&](const PyObject& n) { return n.int_value == value; });
  if (node == nullptr) {
    node = make(PyKind::kInt);
    node->int_value = value;
    if (regions_.empty()) ints_.insert(hash, node);  // a batch's nodes are freed with it
  }
  push(node);
}

void PickleVm::push_tuple(std::size_t first) {
  constexpr std::size_t kMaxShared = 8;  // items; larger tuples are rarely equal
  const std::size_t n = stack_.size() - first;
  const bool shareable = n > 0 && n <= kMaxShared;
  uint64_t hash = n;
  if (shareable) {
    for (std::size_t i = first; i < stack_.size(); ++i) {
      hash = mix(hash, reinterpret_cast<uintptr_t>(stack_[i]));
    }
    PyObject* equal = tuples_.find(hash, [&](const PyObject& tuple) {
      return tuple.items.size() == n &&
             std::equal(tuple.items.begin(), tuple.items.end(),
                        stack_.begin() + static_cast<std::ptrdiff_t>(first));
    });
    if (equal != nullptr) {
      stack_.resize(first);
      push(equal);
      return;
    }
  }
  PyObject* tuple = make(PyKind::kTuple);
  move_items_from(first, tuple);
  if (shareable && regions_.empty()) tuples_.insert(hash, tuple);
  push(tuple);
}

void PickleVm::long_bytes(uint64_t n) {
  if (n > kMaxBigIntBytes) {
    fail("integer of " + std::to_string(n) + " bytes (dcpp reads ints of up to " +
         std::to_string(kMaxBigIntBytes) + " bytes, some 4900 decimal digits)");
  }
  std::string_view data = take(n);
  if (n > 8) {
    PyObject* object = make(PyKind::kBigInt);
    object->text = data;
    push(object);
    return;
  }
  uint64_t bits = 0;
  for (std::size_t i = 0; i < data.size(); ++i) {
    bits |= static_cast<uint64_t>(static_cast<uint8_t>(data[i])) << (8 * i);
  }
  if (n > 0 && n < 8 && (static_cast<uint8_t>(data[n - 1]) & 0x80) != 0) {
    bits |= ~uint64_t{0} << (8 * n);  // sign-extend
  }
  push_int(static_cast<int64_t>(bits));
}

Unpickled PickleVm::run() {
  none_ = make(PyKind::kNone);
  true_ = make(PyKind::kBool);
  true_->bool_value = true;
  false_ = make(PyKind::kBool);
  empty_tuple_ = make(PyKind::kTuple);
  while (!stopped_) {
    if (pos_ >= bytes_.size()) {
      op_pos_ = pos_;
      op_ = 0;
      fail("truncated: the pickle ends without STOP");
    }
    op_pos_ = pos_;
    op_ = static_cast<uint8_t>(bytes_[pos_++]);
    step(op_);
  }
  return std::move(result_);
}

void PickleVm::step(uint8_t code) {
  switch (code) {
    case op::kProto: {
      const uint8_t version = u8();
      if (version > 5) {
        fail("unsupported pickle protocol " + std::to_string(version));
      }
      break;
    }
    case op::kFrame:
      need(le(8));  // a frame is only a read-ahead hint; its length must still fit
      break;
    case op::kStop: {
      if (!marks_.empty() || stack_.size() != 1) {
        fail("STOP with " + std::to_string(stack_.size()) + " values and " +
             std::to_string(marks_.size()) + " marks on the stack (expected one value)");
      }
      result_.root_ = stack_.back();
      stopped_ = true;
      break;
    }
    case op::kNone:
      push(none_);
      break;
    case op::kNewTrue:
      push(true_);
      break;
    case op::kNewFalse:
      push(false_);
      break;
    case op::kBinInt:
      push_int(static_cast<int32_t>(static_cast<uint32_t>(le(4))));
      break;
    case op::kBinInt1:
      push_int(static_cast<int64_t>(le(1)));
      break;
    case op::kBinInt2:
      push_int(static_cast<int64_t>(le(2)));
      break;
    case op::kLong1:
      long_bytes(le(1));
      break;
    case op::kLong4: {
      const auto n = static_cast<int32_t>(static_cast<uint32_t>(le(4)));
      if (n < 0) {
        fail("negative LONG4 length");
      }
      long_bytes(static_cast<uint64_t>(n));
      break;
    }
    case op::kBinFloat: {
      uint64_t bits = 0;
      std::string_view data = take(8);
      for (int i = 0; i < 8; ++i) bits = (bits << 8) | static_cast<uint8_t>(data[i]);
      PyObject* object = make(PyKind::kFloat);
      std::memcpy(&object->float_value, &bits, sizeof bits);
      push(object);
      break;
    }
    case op::kShortBinUnicode:
    case op::kBinUnicode:
    case op::kBinUnicode8:
    case op::kShortBinBytes:
    case op::kBinBytes:
    case op::kBinBytes8: {
      const bool is_str =
          code == op::kShortBinUnicode || code == op::kBinUnicode || code == op::kBinUnicode8;
      const int width = (code == op::kShortBinUnicode || code == op::kShortBinBytes) ? 1
                        : (code == op::kBinUnicode || code == op::kBinBytes)         ? 4
                                                                                     : 8;
      std::string_view data = take(le(width));
      PyObject* object = make(is_str ? PyKind::kStr : PyKind::kBytes);
      object->text = data;
      push(object);
      break;
    }
    case op::kMemoize:
      memo_put(memo_count_);
      break;
    case op::kBinPut:
      memo_put(le(1));
      break;
    case op::kLongBinPut:
      memo_put(le(4));
      break;
    case op::kBinGet:
      memo_get(le(1));
      break;
    case op::kLongBinGet:
      memo_get(le(4));
      break;
    case op::kGlobal: {
      const std::string_view module = line();
      const std::string_view name = line();
      global(module, name);
      break;
    }
    case op::kStackGlobal: {
      PyObject* name = pop();
      PyObject* module = pop();
      if (module->kind != PyKind::kStr || name->kind != PyKind::kStr) {
        fail("STACK_GLOBAL needs two str, got " + describe(*module) + " and " + describe(*name));
      }
      global(module->text, name->text);
      break;
    }
    case op::kMark:
      marks_.push_back(stack_.size());
      if (!stack_.empty() && stack_.back()->streamed) begin_region();
      break;
    case op::kEmptyTuple:
      push(empty_tuple_);
      break;
    case op::kTuple1:
    case op::kTuple2:
    case op::kTuple3: {
      const std::size_t n = code - op::kTuple1 + 1;
      if (stack_.size() < fence() + n) {
        fail("stack underflow");
      }
      push_tuple(stack_.size() - n);
      break;
    }
    case op::kTuple:
    case op::kList:
    case op::kDict:
    case op::kFrozenSet: {
      const std::size_t first = pop_mark();
      if (code == op::kDict && (stack_.size() - first) % 2 != 0) {
        fail("DICT with an odd number of items");
      }
      if (code == op::kTuple) {
        push_tuple(first);
        break;
      }
      const PyKind kind = code == op::kList   ? PyKind::kList
                          : code == op::kDict ? PyKind::kDict
                                              : PyKind::kFrozenSet;
      PyObject* object = make(kind);
      move_items_from(first, object);
      push(object);
      break;
    }
    case op::kEmptyList:
    case op::kEmptyDict: {
      PyObject* container = make(code == op::kEmptyList ? PyKind::kList : PyKind::kDict);
      container->streamed = stream_ != nullptr && stream_->adopt(*container, stack_, marks_);
      push(container);
      break;
    }
    case op::kEmptySet:
      push(make(PyKind::kSet));
      break;
    case op::kAppend: {
      if (stack_.size() < fence() + 2) fail("stack underflow");
      add_items(stack_.size() - 1, PyKind::kList, "APPEND");
      break;
    }
    case op::kAppends:
    case op::kAddItems: {
      const std::size_t first = pop_mark();
      if (first <= fence()) fail("stack underflow");
      if (code == op::kAddItems) {
        PyObject* set = stack_[first - 1];
        check_mutable(set);
        move_items_from(first, expect_container(set, PyKind::kSet, "ADDITEMS"));
      } else {
        add_items(first, PyKind::kList, "APPENDS");
      }
      break;
    }
    case op::kSetItem: {
      if (stack_.size() < fence() + 3) fail("stack underflow");
      add_items(stack_.size() - 2, PyKind::kDict, "SETITEM");
      break;
    }
    case op::kSetItems: {
      const std::size_t first = pop_mark();
      if ((stack_.size() - first) % 2 != 0) {
        fail("SETITEMS with an odd number of items");
      }
      if (first <= fence()) fail("stack underflow");
      add_items(first, PyKind::kDict, "SETITEMS");
      break;
    }
    case op::kReduce:
    case op::kNewObj: {
      PyObject* args = pop();
      PyObject* callable = pop();
      const char* name = code == op::kReduce ? "REDUCE" : "NEWOBJ";
      if (callable->kind != PyKind::kGlobal) {
        fail(std::string(name) + " of a " + describe(*callable) + " (only globals are callable)");
      }
      if (args->kind != PyKind::kTuple) {
        fail(std::string(name) + " with arguments that are a " + describe(*args) + ", not a tuple");
      }
      if (code == op::kReduce && args->items.empty() &&
          callable->is_global("collections", "OrderedDict")) {
        push(make(PyKind::kDict));  // OrderedDict() is data: a dict that SETITEMS fills
        break;
      }
      PyObject* object = make(code == op::kReduce ? PyKind::kReduce : PyKind::kNewObj);
      set_items(object, {callable, args, nullptr, nullptr, nullptr});
      push(object);
      break;
    }
    case op::kBuild: {
      PyObject* state = pop();
      PyObject* object = top();
      if (object->kind == PyKind::kDict && state->kind == PyKind::kDict) {
        // An OrderedDict with attributes (a module's state_dict() carries `_metadata`): Python
        // sets them on the instance; they are not data, and are dropped.
        break;
      }
      if (object->kind != PyKind::kNewObj && object->kind != PyKind::kReduce) {
        fail("BUILD on a " + describe(*object));
      }
      check_mutable(object);
      if (object->items[2] != nullptr) {
        fail("BUILD twice on one " + describe(*object));
      }
      object->items.data_[2] = state;
      break;
    }
    case op::kBinPersId: {
      PyObject* pid = pop();
      PyObject* object = make(PyKind::kPersistent);
      set_items(object, {pid});
      push(object);
      break;
    }
    default:
      fail("unsupported opcode");
  }
}

Unpickled unpickle(std::string_view bytes, const GlobalAllowlist& allow, std::string_view source,
                   ContainerStream* stream) {
  return PickleVm(bytes, allow, source, stream).run();
}

}  // namespace dcpp::detail
