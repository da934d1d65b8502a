#include "memory/step_crc_check.h"

#include "format/crc32.h"

#include <dcpp/core/checkpoint_error.h>

#include <algorithm>

namespace dcpp::detail {

StepCrcCheck::StepCrcCheck(const MemoryStep& step) : step_(step) {}

void StepCrcCheck::copy(std::string_view from, void* to) {
  const uint32_t crc = crc32_copy(0, to, from.data(), from.size());  // one pass over `from`
  covered_.push_back(
      Covered{static_cast<uint64_t>(from.data() - step_.bytes.data()), from.size(), crc});
}

void StepCrcCheck::finish() {
  if (finished_) return;
  std::sort(covered_.begin(), covered_.end(),
            [](const Covered& a, const Covered& b) { return a.offset < b.offset; });
  // Ranges are whole chunks: disjoint, or the same chunk copied twice (counted once).
  const char* bytes = step_.bytes.data();
  uint32_t crc = 0;
  uint64_t position = 0;
  for (const Covered& range : covered_) {
    if (range.offset < position) {
      if (range.offset + range.length <= position) continue;  // a chunk copied again
      crc = 0;  // ranges that overlap otherwise: no shortcut, every byte checksummed below
      position = 0;
      break;
    }
    crc = crc32(crc, bytes + position, static_cast<std::size_t>(range.offset - position));
    crc = crc32_combine(crc, range.crc, range.length);
    position = range.offset + range.length;
  }
  crc = crc32(crc, bytes + position, static_cast<std::size_t>(step_.bytes.size() - position));
  finished_ = true;
  if (crc != step_.crc32) {
    throw CheckpointError(ErrorKind::kCorrupt,
                          "memory step " + step_.region + ": step " + std::to_string(step_.step) +
                              "'s bytes do not match the CRC-32 its header records; what was "
                              "loaded from it is not to be used: load from the memory tier's "
                              "other slot or the next tier");
  }
}

}  // namespace dcpp::detail
