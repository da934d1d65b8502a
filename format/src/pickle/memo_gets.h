#pragma once
// Which memo entries a pickle ever reads back, found before it is run: the unpickler keeps only
// those, so that a pickle that memoizes each of its millions of objects (as Python's pickler does)
// does not keep a table of them all, and objects nothing reads back can be freed.

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace dcpp::detail {

/// The memo indices a pickle reads back (BINGET, LONG_BINGET), each numbered by its rank among
/// them: the unpickler keeps their objects in a dense table of that many slots.
class MemoGets {
 public:
  bool contains(uint64_t index) const {
    return index / 64 < words_.size() && (words_[index / 64] >> (index % 64) & 1) != 0;
  }
  /// The slot of `index`, which contains() must hold: how many indices read back are smaller.
  std::size_t slot(uint64_t index) const {
    const uint64_t below = words_[index / 64] & ((uint64_t{1} << (index % 64)) - 1);
    return before_[index / 64] + static_cast<std::size_t>(__builtin_popcountll(below));
  }
  /// How many indices are read back.
  std::size_t size() const { return size_; }

 private:
  friend MemoGets memo_gets(std::string_view pickle);
  std::vector<uint64_t> words_;  // bit i: index i is read back
  std::vector<uint32_t> before_;  // [w]: the bits set in words_[0, w)
  std::size_t size_ = 0;
};

/// The memo indices that a BINGET or LONG_BINGET of `pickle` reads. Scans the opcodes the
/// unpickler runs, with the same argument lengths, up to STOP; at an opcode it does not run, or
/// at truncation, it stops (the unpickler fails there). Never reads past the end.
MemoGets memo_gets(std::string_view pickle);

}  // namespace dcpp::detail
