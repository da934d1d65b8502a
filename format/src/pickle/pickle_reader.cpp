#include "format/pickle/pickle_reader.h"

#include <dcpp/core/checkpoint_error.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

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

PyObject* Unpickled::make_node() {
  if (block_used_ == block_capacity_) {
    block_capacity_ = blocks_.empty() ? kFirstBlockSize : std::min(kBlockSize, 2 * block_capacity_);
    blocks_.push_back(std::make_unique<PyObject[]>(block_capacity_));
    block_used_ = 0;
  }
  ++node_count_;
  return &blocks_.back()[block_used_++];
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
      return "global " + object.text + "." + object.name;
    case PyKind::kNewObj:
    case PyKind::kReduce: {
      const PyObject& callable = object.callable();
      if (callable.kind == PyKind::kGlobal) {
        return "object " + callable.text + "." + callable.name;
      }
      return "object";
    }
    case PyKind::kPersistent:
      return "persistent id";
  }
  return "object";
}

class PickleVm {
 public:
  PickleVm(std::string_view bytes, const GlobalAllowlist& allow, std::string_view source)
      : bytes_(bytes), allow_(allow), source_(source) {}

  Unpickled run();

 private:
  [[noreturn]] void fail(const std::string& problem) const;
  PyObject* make(PyKind kind);
  void push(PyObject* object) { stack_.push_back(object); }
  std::size_t fence() const { return marks_.empty() ? 0 : marks_.back(); }
  PyObject* pop();
  PyObject* top();
  std::vector<PyObject*> pop_mark();
  void need(uint64_t n) const;
  uint8_t u8();
  uint64_t le(int n);
  std::string_view take(uint64_t n);
  std::string_view line();
  void memo_put(uint64_t index);
  void memo_get(uint64_t index);
  void global(std::string module, std::string name);
  [[noreturn]] void refuse_global(const std::string& module, const std::string& name,
                                  const char* why) const;
  PyObject* expect_container(PyObject* object, PyKind kind, const char* opcode_name);
  /// The list or dict `kind` that APPEND(S) or SETITEM(S) fill: `object` itself, or the items of a
  /// made object (created on first use).
  PyObject* items_of(PyObject* object, PyKind kind, const char* opcode_name);
  void push_int(int64_t value);
  void long_bytes(uint64_t n);
  void step(uint8_t code);

  std::string_view bytes_;
  const GlobalAllowlist& allow_;
  std::string_view source_;
  std::size_t pos_ = 0;
  std::size_t op_pos_ = 0;
  uint8_t op_ = 0;
  Unpickled result_;
  std::vector<PyObject*> stack_;
  std::vector<std::size_t> marks_;
  std::vector<PyObject*> memo_;  // index -> object; nullptr where undefined
  std::size_t memo_count_ = 0;   // defined entries: MEMOIZE's next index, as len(memo) in Python
  PyObject* none_ = nullptr;
  PyObject* true_ = nullptr;
  PyObject* false_ = nullptr;
  PyObject* empty_tuple_ = nullptr;
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
  PyObject* object = result_.make_node();
  object->kind = kind;
  return object;
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

std::vector<PyObject*> PickleVm::pop_mark() {
  if (marks_.empty()) {
    fail("no MARK on the stack");
  }
  const std::size_t start = marks_.back();
  marks_.pop_back();
  std::vector<PyObject*> items(stack_.begin() + static_cast<std::ptrdiff_t>(start), stack_.end());
  stack_.resize(start);
  return items;
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
  if (index >= memo_.size()) {
    memo_.resize(std::min(bytes_.size(), std::max<std::size_t>(index + 1, 2 * memo_.size())));
  }
  memo_count_ += memo_[index] == nullptr ? 1 : 0;
  memo_[index] = object;
}

void PickleVm::memo_get(uint64_t index) {
  if (index >= memo_.size() || memo_[index] == nullptr) {
    fail("memo entry " + std::to_string(index) + " is not defined");
  }
  push(memo_[index]);
}

void PickleVm::refuse_global(const std::string& module, const std::string& name,
                             const char* why) const {
  // Not malformed: a well-formed pickle of something dcpp will not pass on.
  throw CheckpointError(ErrorKind::kCorrupt,
                        std::string(source_) + ": refers to the Python global '" +
                            printable(module) + "." + printable(name) + "' (pickle byte " +
                            std::to_string(op_pos_) + "), " + why);
}

void PickleVm::global(std::string module, std::string name) {
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
  PyObject* object = make(PyKind::kGlobal);
  object->text = std::move(module);
  object->name = std::move(name);
  push(object);
}

PyObject* PickleVm::items_of(PyObject* object, PyKind kind, const char* opcode_name) {
  if (object->kind == PyKind::kNewObj || object->kind == PyKind::kReduce) {
    // A list or dict subclass: Python appends or sets the items on the object it made.
    PyObject*& items = object->items[kind == PyKind::kList ? 3 : 4];
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

void PickleVm::push_int(int64_t value) {
  PyObject* object = make(PyKind::kInt);
  object->int_value = value;
  push(object);
}

void PickleVm::long_bytes(uint64_t n) {
  if (n > kMaxBigIntBytes) {
    fail("integer of " + std::to_string(n) + " bytes (dcpp reads ints of up to " +
         std::to_string(kMaxBigIntBytes) + " bytes, some 4900 decimal digits)");
  }
  std::string_view data = take(n);
  if (n > 8) {
    PyObject* object = make(PyKind::kBigInt);
    object->text.assign(data);
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
      object->text.assign(data);
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
      std::string module(line());
      std::string name(line());
      global(std::move(module), std::move(name));
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
      PyObject* tuple = make(PyKind::kTuple);
      tuple->items.assign(stack_.end() - static_cast<std::ptrdiff_t>(n), stack_.end());
      stack_.resize(stack_.size() - n);
      push(tuple);
      break;
    }
    case op::kTuple:
    case op::kList:
    case op::kDict:
    case op::kFrozenSet: {
      std::vector<PyObject*> items = pop_mark();
      if (code == op::kDict && items.size() % 2 != 0) {
        fail("DICT with an odd number of items");
      }
      const PyKind kind = code == op::kTuple  ? PyKind::kTuple
                          : code == op::kList ? PyKind::kList
                          : code == op::kDict ? PyKind::kDict
                                              : PyKind::kFrozenSet;
      PyObject* object = make(kind);
      object->items = std::move(items);
      push(object);
      break;
    }
    case op::kEmptyList:
      push(make(PyKind::kList));
      break;
    case op::kEmptyDict:
      push(make(PyKind::kDict));
      break;
    case op::kEmptySet:
      push(make(PyKind::kSet));
      break;
    case op::kAppend: {
      PyObject* value = pop();
      items_of(top(), PyKind::kList, "APPEND")->items.push_back(value);
      break;
    }
    case op::kAppends:
    case op::kAddItems: {
      std::vector<PyObject*> items = pop_mark();
      const bool add = code == op::kAddItems;
      PyObject* target = add ? expect_container(top(), PyKind::kSet, "ADDITEMS")
                             : items_of(top(), PyKind::kList, "APPENDS");
      target->items.insert(target->items.end(), items.begin(), items.end());
      break;
    }
    case op::kSetItem: {
      PyObject* value = pop();
      PyObject* key = pop();
      PyObject* dict = items_of(top(), PyKind::kDict, "SETITEM");
      dict->items.push_back(key);
      dict->items.push_back(value);
      break;
    }
    case op::kSetItems: {
      std::vector<PyObject*> items = pop_mark();
      if (items.size() % 2 != 0) {
        fail("SETITEMS with an odd number of items");
      }
      PyObject* dict = items_of(top(), PyKind::kDict, "SETITEMS");
      dict->items.insert(dict->items.end(), items.begin(), items.end());
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
      object->items = {callable, args, nullptr, nullptr, nullptr};
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
      if (object->items[2] != nullptr) {
        fail("BUILD twice on one " + describe(*object));
      }
      object->items[2] = state;
      break;
    }
    case op::kBinPersId: {
      PyObject* pid = pop();
      PyObject* object = make(PyKind::kPersistent);
      object->items = {pid};
      push(object);
      break;
    }
    default:
      fail("unsupported opcode");
  }
}

Unpickled unpickle(std::string_view bytes, const GlobalAllowlist& allow, std::string_view source) {
  return PickleVm(bytes, allow, source).run();
}

}  // namespace dcpp::detail
