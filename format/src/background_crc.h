#pragma once
// CRC-32 of a stream of blocks, computed on a thread of its own while the caller moves bytes.

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <thread>
#include <utility>

namespace dcpp::detail {

/// Checksums blocks in the order they are added, on a helper thread, so that a large record's
/// CRC-32 costs no time on the thread that writes or reads it (with a second core). Each block
/// must stay valid and unchanged until `finish` returns. Used by one thread; never throws from the
/// helper thread.
class BackgroundCrc {
 public:
  BackgroundCrc();
  /// Joins the helper thread; the result is discarded if `finish` was not called.
  ~BackgroundCrc();
  BackgroundCrc(const BackgroundCrc&) = delete;
  BackgroundCrc& operator=(const BackgroundCrc&) = delete;

  void add(const void* data, std::size_t size);
  /// Waits until every block added is checksummed; returns the CRC-32 of their concatenation.
  uint32_t finish();

 private:
  void run();

  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<std::pair<const void*, std::size_t>> pending_;
  bool closing_ = false;
  bool idle_ = true;
  uint32_t crc_ = 0;
  std::thread thread_;
};

}  // namespace dcpp::detail
