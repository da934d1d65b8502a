#pragma once
// A low-level emitter of Python pickle opcodes, protocol 2 (what `torch.save` writes) or 4 (what
// DCP's `.metadata` holds).
//
// The writer mirrors CPython's `_pickle.c` choices so that dcpp's output matches Python's byte for
// byte where it can: the same integer and string opcodes, tuples of up to 3 items as TUPLE1/2/3,
// non-empty tuples, strings, lists, dicts, globals and REDUCE/NEWOBJ results memoized as soon as
// they are built (BINPUT in protocol 2, MEMOIZE in protocol 4), list and dict items in batches of
// 1000 (APPEND/SETITEM for a batch of one). Python memoizes by object identity; dcpp has no Python
// objects, so callers say which values are "the same object" through `shared` keys (a global, an
// interned string), which are written once and fetched with BINGET afterwards.
//
// Protocol 4 output is framed like CPython's: PROTO, then FRAME headers around at most ~64 KiB of
// opcodes each (a frame under 4 bytes gets no header). Not thread-safe.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace dcpp::detail {

/// Pickle opcodes (CPython's Lib/pickle.py names), shared by the writer and the reader.
namespace op {
constexpr uint8_t kMark = '(';
constexpr uint8_t kStop = '.';
constexpr uint8_t kBinFloat = 'G';
constexpr uint8_t kBinInt = 'J';
constexpr uint8_t kBinInt1 = 'K';
constexpr uint8_t kBinInt2 = 'M';
constexpr uint8_t kNone = 'N';
constexpr uint8_t kBinPersId = 'Q';
constexpr uint8_t kReduce = 'R';
constexpr uint8_t kBinUnicode = 'X';
constexpr uint8_t kAppend = 'a';
constexpr uint8_t kBuild = 'b';
constexpr uint8_t kGlobal = 'c';
constexpr uint8_t kDict = 'd';
constexpr uint8_t kEmptyDict = '}';
constexpr uint8_t kAppends = 'e';
constexpr uint8_t kBinGet = 'h';
constexpr uint8_t kLongBinGet = 'j';
constexpr uint8_t kList = 'l';
constexpr uint8_t kEmptyList = ']';
constexpr uint8_t kBinPut = 'q';
constexpr uint8_t kLongBinPut = 'r';
constexpr uint8_t kSetItem = 's';
constexpr uint8_t kTuple = 't';
constexpr uint8_t kEmptyTuple = ')';
constexpr uint8_t kSetItems = 'u';
constexpr uint8_t kBinBytes = 'B';
constexpr uint8_t kShortBinBytes = 'C';
constexpr uint8_t kProto = 0x80;
constexpr uint8_t kNewObj = 0x81;
constexpr uint8_t kTuple1 = 0x85;
constexpr uint8_t kTuple2 = 0x86;
constexpr uint8_t kTuple3 = 0x87;
constexpr uint8_t kNewTrue = 0x88;
constexpr uint8_t kNewFalse = 0x89;
constexpr uint8_t kLong1 = 0x8a;
constexpr uint8_t kLong4 = 0x8b;
constexpr uint8_t kShortBinUnicode = 0x8c;
constexpr uint8_t kBinUnicode8 = 0x8d;
constexpr uint8_t kBinBytes8 = 0x8e;
constexpr uint8_t kEmptySet = 0x8f;
constexpr uint8_t kAddItems = 0x90;
constexpr uint8_t kFrozenSet = 0x91;
constexpr uint8_t kStackGlobal = 0x93;
constexpr uint8_t kMemoize = 0x94;
constexpr uint8_t kFrame = 0x95;
}  // namespace op

class PickleWriter {
 public:
  /// Starts a pickle with PROTO `protocol` (2 or 4; anything else is a CheckpointError).
  explicit PickleWriter(int protocol);

  int protocol() const { return protocol_; }

  // Scalars (never memoized, as in Python).
  void put_none();
  void put_bool(bool value);
  /// BININT1, BININT2, BININT or LONG1, whichever Python picks for `value`.
  void put_int(int64_t value) {
    boundary();
    if (value >= 0 && value <= 0xff) {
      op(op::kBinInt1);
      out_.push_back(static_cast<char>(value));
    } else if (value >= 0 && value <= 0xffff) {
      op(op::kBinInt2);
      out_.push_back(static_cast<char>(value & 0xff));
      out_.push_back(static_cast<char>(value >> 8));
    } else {
      put_wide_int(value);
    }
  }
  void put_float(double value);
  /// An int of any size as LONG1 or LONG4: `bytes` are its little-endian two's complement.
  void put_long(std::string_view bytes);

  /// A new str object (UTF-8 bytes, not checked), memoized.
  void put_str(std::string_view value);
  /// A str that is one object per distinct content: written and memoized the first time, fetched
  /// from the memo afterwards. Returns its memo index: a caller that writes the same str often
  /// may keep it and put_memo() it, skipping the lookup.
  uint32_t put_shared_str(std::string_view value);
  /// `module.name` as GLOBAL (protocol 2) or STACK_GLOBAL with shared module and name strings
  /// (protocol 4); one object per distinct global, like Python's class and function objects.
  /// Returns its memo index, as put_shared_str does.
  uint32_t put_global(std::string_view module, std::string_view name);

  /// Memoizes the stack top (BINPUT/LONG_BINPUT or MEMOIZE) and returns its memo index.
  uint32_t memoize() {
    const uint32_t index = memo_size_++;
    if (protocol_ >= 4) {
      op(op::kMemoize);
    } else {
      put_memo_opcode(op::kBinPut, op::kLongBinPut, index);
    }
    return index;
  }
  /// Pushes memo entry `index` (BINGET/LONG_BINGET).
  void put_memo(uint32_t index) {
    boundary();
    put_memo_opcode(op::kBinGet, op::kLongBinGet, index);
  }
  /// If `key` was remembered with `remember_shared`, pushes that memo entry and returns true;
  /// otherwise returns false and the caller writes the value, then calls `remember_shared(key)`.
  bool put_shared(std::string_view key);
  /// Memoizes the stack top (if `memoized_index` is negative) and remembers it under `key`;
  /// returns its memo index.
  uint32_t remember_shared(std::string_view key, int64_t memoized_index = -1);

  /// Writes a tuple of `size` items: `items()` pushes them. Empty tuples are EMPTY_TUPLE, 1 to 3
  /// items TUPLE1/2/3, more MARK ... TUPLE; non-empty tuples are memoized.
  template <typename Items>
  void put_tuple(std::size_t size, Items&& items) {
    if (open_tuple(size)) {
      items();
      close_tuple(size);
    }
  }
  /// EMPTY_LIST, memoized, then `size` items pushed by `item(i)` in batches (APPEND or
  /// MARK ... APPENDS).
  template <typename Item>
  void put_list(std::size_t size, Item&& item) {
    open_container(op::kEmptyList);
    append_items(size, item);
  }
  /// EMPTY_DICT, memoized, then `size` entries (key then value pushed by `entry(i)`) in batches
  /// (SETITEM or MARK ... SETITEMS).
  template <typename Entry>
  void put_dict(std::size_t size, Entry&& entry) {
    open_container(op::kEmptyDict);
    set_items(size, entry);
  }
  /// Appends `size` items (pushed by `item(i)`) to the list or object on the stack top (batched
  /// like `put_list`), without creating it.
  template <typename Item>
  void append_items(std::size_t size, Item&& item) {
    in_batches(size, item, op::kAppend, op::kAppends);
  }
  /// Adds `size` key/value pairs (pushed by `entry(i)`) to the dict or object on the stack top
  /// (batched like `put_dict`), without creating it.
  template <typename Entry>
  void set_items(std::size_t size, Entry&& entry) {
    in_batches(size, entry, op::kSetItem, op::kSetItems);
  }

  // Raw structural opcodes.
  void mark();
  void empty_tuple() {
    boundary();
    op(op::kEmptyTuple);
  }
  /// REDUCE, memoized (callable and argument tuple on the stack); returns the memo index.
  uint32_t reduce() {
    op(op::kReduce);
    return memoize();
  }
  /// NEWOBJ, memoized (class and argument tuple on the stack).
  void newobj() {
    op(op::kNewObj);
    memoize();
  }
  /// BUILD (object and state on the stack).
  void build() { op(op::kBuild); }
  /// BINPERSID (persistent id on the stack).
  void binpersid();

  /// Makes room for `bytes` of output ahead: a pickle of a known scale is written without the
  /// output's doublings (each a copy of all so far, into pages touched for the first time).
  void reserve(std::size_t bytes);

  /// Writes STOP, closes the last frame and returns the pickle. The writer is spent afterwards.
  std::string finish();

 private:
  // The opcodes, one or a few per object of a `.metadata`'s millions: inline.
  void op(uint8_t code) {
    if (finished_) throw_finished();
    if (protocol_ >= 4 && frame_start_ == kNoFrame) open_frame();
    out_.push_back(static_cast<char>(code));
  }
  /// `short_code` with a 1-byte index below 256, else `long_code` with a 4-byte one.
  void put_memo_opcode(uint8_t short_code, uint8_t long_code, uint32_t index) {
    if (index < 256) {
      op(short_code);
      out_.push_back(static_cast<char>(index));
    } else {
      op(long_code);
      raw_u32(index);
    }
  }
  void raw(const void* data, std::size_t size) {
    out_.append(static_cast<const char*>(data), size);
  }
  void raw_u32(uint32_t value) {
    const char bytes[4] = {static_cast<char>(value), static_cast<char>(value >> 8),
                           static_cast<char>(value >> 16), static_cast<char>(value >> 24)};
    raw(bytes, 4);
  }
  void raw_u64(uint64_t value);
  void string_op(std::string_view value);
  /// Called between objects: closes the current frame once it holds ~64 KiB (protocol 4; a
  /// protocol 2 pickle never opens one).
  void boundary() {
    if (frame_start_ != kNoFrame &&
        out_.size() - frame_start_ - kFrameHeaderSize >= kFrameSizeTarget) {
      commit_frame();
    }
  }
  void open_frame();
  [[noreturn]] void throw_finished() const;
  void commit_frame();
  static constexpr std::size_t kFrameHeaderSize = 9;
  static constexpr std::size_t kFrameSizeTarget = 64 * 1024;
  static constexpr std::size_t kNoFrame = static_cast<std::size_t>(-1);
  /// put_tuple's opcodes around its items; open_tuple returns false for the empty tuple.
  bool open_tuple(std::size_t size) {
    boundary();
    if (size == 0) {
      op(op::kEmptyTuple);
      return false;
    }
    if (size > 3) op(op::kMark);
    return true;
  }
  void close_tuple(std::size_t size) {
    op(size == 1 ? op::kTuple1 : size == 2 ? op::kTuple2 : size == 3 ? op::kTuple3 : op::kTuple);
    memoize();
  }
  /// BININT or LONG1: put_int's values beyond BININT2.
  void put_wide_int(int64_t value);
  /// EMPTY_LIST or EMPTY_DICT, memoized.
  void open_container(uint8_t code) {
    boundary();
    op(code);
    memoize();
  }
  /// `each(i)` for i in [0, size), in batches of 1000: `one` after a batch of one, else MARK
  /// before the batch and `many` after it.
  template <typename Each>
  void in_batches(std::size_t size, Each& each, uint8_t one, uint8_t many) {
    for (std::size_t begin = 0; begin < size; begin += kBatchSize) {
      const std::size_t end = size - begin < kBatchSize ? size : begin + kBatchSize;
      if (end - begin == 1) {
        each(begin);
        op(one);
      } else {
        op(op::kMark);
        for (std::size_t i = begin; i < end; ++i) each(i);
        op(many);
      }
    }
  }
  static constexpr std::size_t kBatchSize = 1000;
  /// put_shared() of a key already built (in key_scratch_ or elsewhere): its memo index, if it
  /// was remembered.
  std::optional<uint32_t> put_memo_of(const std::string& key);

  int protocol_;
  std::string out_;
  std::size_t frame_start_ = 0;  // protocol 4: where the current frame's 9 reserved bytes are
  uint32_t memo_size_ = 0;
  std::unordered_map<std::string, uint32_t> shared_;
  std::string key_scratch_;  // lookup keys are built here: no allocation per lookup
  struct SharedGlobal {
    std::string module;
    std::string name;
    uint32_t memo_index;
  };
  std::vector<SharedGlobal> globals_;
  bool finished_ = false;
};

}  // namespace dcpp::detail
