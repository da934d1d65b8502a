#pragma once
// Which memo entries a pickle ever reads back, found before it is run: the unpickler keeps only
// those, so that a pickle that memoizes each of its millions of objects (as Python's pickler does)
// does not keep a table of them all, and objects nothing reads back can be freed.

#include <cstdint>
#include <string_view>
#include <vector>

namespace dcpp::detail {

/// For each memo index, true if a BINGET or LONG_BINGET of `pickle` names it. Scans the opcodes
/// the unpickler runs, with the same argument lengths, up to STOP; at an opcode it does not run,
/// or at truncation, it stops (the unpickler fails there). Never reads past the end.
std::vector<bool> memo_gets(std::string_view pickle);

}  // namespace dcpp::detail
