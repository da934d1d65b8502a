#pragma once
// The calling thread's current CUDA device and stream, carried to the helper threads that work for
// it (a save's writer threads, a load's reader threads, the replica check's hashing thread, the
// memory tier's copier): a device copy a helper makes is then ordered after what the caller had
// queued, instead of running on the legacy default stream, which does not wait for a non-blocking
// stream's work. The current device only: touching the others would make a context on each.
// Nothing where this process has no CUDA device.

#include <c10/core/Device.h>
#include <c10/core/Event.h>
#include <c10/core/Stream.h>

#include <functional>
#include <memory>
#include <optional>

namespace dcpp::detail {

class CallerStreams {
 public:
  enum class Order {
    kOnCallersStream,  // run_with: the helper works on the caller's stream itself
    kAfterCallersWork  // run_with: on a stream of its own that waits for an event recorded now
  };

  /// Captures the calling thread's current CUDA device and its current stream; with
  /// kAfterCallersWork, records an event on that stream now.
  explicit CallerStreams(Order order = Order::kOnCallersStream);
  ~CallerStreams();

  /// Runs `body` on the calling thread with the captured device current and, as the order says,
  /// the caller's stream or a stream that waits for the caller's work current on it; then puts
  /// back the thread's own. Not thread-safe with kAfterCallersWork (one helper at a time).
  void run_with(const std::function<void()>& body) const;

 private:
  std::optional<c10::Stream> stream_;
  std::unique_ptr<c10::Event> queued_;  // kAfterCallersWork: recorded on stream_
};

}  // namespace dcpp::detail
