#pragma once
// The S3 requests of this process in flight, bounded across every client (S3Options::
// process_requests_in_flight): a host's ranks, readers, writers and drains share one budget, so
// that together they do not ask a throttling store more than it serves.

namespace dcpp::detail {

/// Holds one of the process's request slots for its lifetime: the constructor waits while
/// `limit` or more requests are in flight (each request compares with its own client's limit).
/// Thread-safe.
class ProcessRequestSlot {
 public:
  explicit ProcessRequestSlot(int limit);
  ~ProcessRequestSlot();
  ProcessRequestSlot(const ProcessRequestSlot&) = delete;
  ProcessRequestSlot& operator=(const ProcessRequestSlot&) = delete;
};

}  // namespace dcpp::detail
