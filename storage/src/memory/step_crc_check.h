#pragma once
// A memory step's CRC-32 checked in the pass that copies its bytes out (MemoryStepReader with
// verify_crc): each range copied whole is checksummed as it is copied (crc32_copy, one read) and
// recorded; finish() checksums the bytes no copy covered, combines the CRCs in offset order and
// compares the result with the step's header. One pass over the bytes instead of a check, then a
// copy.

#include <dcpp/storage/memory_slots.h>

#include <cstdint>
#include <string_view>
#include <vector>

namespace dcpp::detail {

class StepCrcCheck {
 public:
  /// Checks `step` (its bytes and crc32 must outlive this object).
  explicit StepCrcCheck(const MemoryStep& step);

  /// Copies `from` (a range of the step's bytes) to `to` (`from.size()` bytes, not overlapping),
  /// and records the CRC-32 of what `to` received for finish().
  void copy(std::string_view from, void* to);

  /// Throws CheckpointError (kCorrupt) naming the step's region when the step's bytes (the copies'
  /// CRCs and the rest of the bytes) do not match its header's CRC-32. Once: later calls return.
  void finish();

  bool finished() const { return finished_; }

 private:
  struct Covered {
    uint64_t offset;
    uint64_t length;
    uint32_t crc;
  };
  const MemoryStep& step_;
  std::vector<Covered> covered_;
  bool finished_ = false;
};

}  // namespace dcpp::detail
