#include "memo_gets.h"

#include "format/pickle/pickle_writer.h"

#include <cstddef>
#include <limits>

namespace dcpp::detail {

namespace {

/// Reads opcodes and their arguments from a pickle without building anything.
class OpcodeScanner {
 public:
  explicit OpcodeScanner(std::string_view bytes) : bytes_(bytes) {}

  /// The bits of the indices read back, one per index up to the largest.
  std::vector<uint64_t> run() {
    std::vector<uint64_t> words;
    while (pos_ < bytes_.size()) {
      const auto code = static_cast<uint8_t>(bytes_[pos_++]);
      uint64_t get = 0;
      if (!skip_arguments(code, get)) break;
      if (code == op::kBinGet || code == op::kLongBinGet) {
        if (get >= bytes_.size()) break;  // the unpickler refuses it as undefined
        if (get / 64 >= words.size()) words.resize(get / 64 + 1);
        words[get / 64] |= uint64_t{1} << (get % 64);
      }
    }
    return words;
  }

 private:
  /// Moves past `code`'s arguments; false at STOP, an opcode the unpickler does not run, or
  /// truncation. `get`: a BINGET's or LONG_BINGET's index.
  bool skip_arguments(uint8_t code, uint64_t& get) {
    switch (code) {
      case op::kStop:
        return false;
      case op::kProto:
      case op::kBinInt1:
      case op::kBinPut:
        return skip(1);
      case op::kBinInt2:
        return skip(2);
      case op::kBinInt:
      case op::kLongBinPut:
        return skip(4);
      case op::kFrame:
      case op::kBinFloat:
        return skip(8);
      case op::kBinGet:
        return le(1, get);
      case op::kLongBinGet:
        return le(4, get);
      case op::kLong1:
      case op::kShortBinUnicode:
      case op::kShortBinBytes:
        return skip_counted(1);
      case op::kLong4:
      case op::kBinUnicode:
      case op::kBinBytes:
        return skip_counted(4);
      case op::kBinUnicode8:
      case op::kBinBytes8:
        return skip_counted(8);
      case op::kGlobal:
        return skip_line() && skip_line();
      case op::kNone:
      case op::kNewTrue:
      case op::kNewFalse:
      case op::kMemoize:
      case op::kStackGlobal:
      case op::kMark:
      case op::kEmptyTuple:
      case op::kTuple1:
      case op::kTuple2:
      case op::kTuple3:
      case op::kTuple:
      case op::kList:
      case op::kDict:
      case op::kFrozenSet:
      case op::kEmptyList:
      case op::kEmptyDict:
      case op::kEmptySet:
      case op::kAppend:
      case op::kAppends:
      case op::kAddItems:
      case op::kSetItem:
      case op::kSetItems:
      case op::kReduce:
      case op::kNewObj:
      case op::kBuild:
      case op::kBinPersId:
        return true;
      default:
        return false;
    }
  }

  bool skip(uint64_t n) {
    if (n > bytes_.size() - pos_) return false;
    pos_ += static_cast<std::size_t>(n);
    return true;
  }

  bool le(int n, uint64_t& value) {
    if (static_cast<std::size_t>(n) > bytes_.size() - pos_) return false;
    value = 0;
    for (int i = 0; i < n; ++i) {
      value |= static_cast<uint64_t>(static_cast<uint8_t>(bytes_[pos_ + i])) << (8 * i);
    }
    pos_ += static_cast<std::size_t>(n);
    return true;
  }

  /// A length of `width` bytes, then that many bytes.
  bool skip_counted(int width) {
    uint64_t n = 0;
    return le(width, n) && skip(n);
  }

  bool skip_line() {
    const std::size_t end = bytes_.find('\n', pos_);
    if (end == std::string_view::npos) return false;
    pos_ = end + 1;
    return true;
  }

  std::string_view bytes_;
  std::size_t pos_ = 0;
};

}  // namespace

MemoGets memo_gets(std::string_view pickle) {
  MemoGets gets;
  gets.words_ = OpcodeScanner(pickle).run();
  gets.before_.resize(gets.words_.size());
  for (std::size_t w = 0; w < gets.words_.size(); ++w) {
    if (gets.size_ + 64 > std::numeric_limits<uint32_t>::max()) {
      // Over 4 billion objects read back (a pickle of many GiB): the GETs of the rest are
      // refused as undefined, not counted wrong.
      gets.words_.resize(w);
      gets.before_.resize(w);
      break;
    }
    gets.before_[w] = static_cast<uint32_t>(gets.size_);
    gets.size_ += static_cast<std::size_t>(__builtin_popcountll(gets.words_[w]));
  }
  return gets;
}

}  // namespace dcpp::detail
