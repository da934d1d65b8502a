#pragma once
// CRC-32 of a stream of blocks, computed on a thread of its own while the caller moves bytes.

#include "core/serial_worker.h"

#include <cstddef>
#include <cstdint>

namespace dcpp::detail {

/// Checksums blocks in the order they are added, on a helper thread, so that a large record's
/// CRC-32 costs no time on the thread that writes or reads it (with a second core). Each block
/// must stay valid and unchanged until `finish` returns. Used by one thread.
class BackgroundCrc {
 public:
  /// Drops the blocks not yet checksummed; the result is discarded if `finish` was not called.
  ~BackgroundCrc();

  void add(const void* data, std::size_t size);
  /// Waits until every block added is checksummed; returns the CRC-32 of their concatenation.
  uint32_t finish();

 private:
  uint32_t crc_ = 0;  // written by the worker's tasks only, read after wait_until_idle()
  SerialWorker worker_;
};

}  // namespace dcpp::detail
