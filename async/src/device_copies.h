#pragma once
// Staging from CUDA memory: copies from device tensors into pinned host buffers, enqueued on a
// stream of the stager's own and waited for on the stager's threads, so that neither the caller's
// thread nor its stream ever waits for them. Compiled with CUDA only where libtorch has CUDA
// (DCPP_WITH_CUDA); without it handles() is false for every tensor.

#include <ATen/core/Tensor.h>

#include <cstddef>
#include <memory>
#include <vector>

namespace dcpp::detail {

/// One stager's device-to-host copies: one stream per device (its own, made on first use and kept;
/// not one of libtorch's pool, which NCCL draws from) and one event per staging buffer (made again
/// when its tensor moved to another device), blocking-sync, so waiting threads sleep. Not
/// thread-safe between enqueue() calls (the stager prepares one job at a time); wait(i) is safe on
/// any thread for distinct i, once the enqueue(i) that precedes it has returned.
class DeviceCopies {
 public:
  DeviceCopies();
  ~DeviceCopies();
  DeviceCopies(const DeviceCopies&) = delete;
  DeviceCopies& operator=(const DeviceCopies&) = delete;

  /// Whether `tensor` is staged through here: a CUDA tensor, in a build with CUDA.
  static bool handles(const at::Tensor& tensor);

  /// A CPU tensor of `dtype` and `sizes` in page-locked memory of exactly its size (page-aligned
  /// host memory registered with CUDA, unregistered and freed with the tensor): not libtorch's
  /// caching host allocator, which rounds each block up to a power of two and keeps freed blocks,
  /// so the stager's staging_bytes() is what it pins. Throws c10::Error from CUDA.
  static at::Tensor pinned_buffer(at::ScalarType dtype, const std::vector<int64_t>& sizes);
  /// The bytes pinned_buffer pins for a tensor of `bytes`: whole pages (none for 0).
  static int64_t pinned_length(int64_t bytes);

  /// Enqueues the copy of `source` (on CUDA) into `pinned` (page-locked host memory of the same
  /// dtype and sizes) as copy `index`: on this stager's stream of source's device, after the work
  /// already queued on the calling thread's current stream of that device (an event recorded
  /// there, which that stream does not wait for). Returns at once. The source's memory is kept
  /// from reuse by libtorch's caching allocator until the copy is done. Throws c10::Error from
  /// CUDA.
  void enqueue(std::size_t index, const at::Tensor& source, const at::Tensor& pinned);
  /// Blocks the calling thread until copy `index` is complete. Throws c10::Error from CUDA.
  void wait(std::size_t index);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace dcpp::detail
