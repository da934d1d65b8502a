#pragma once
// The staging logic, written once: what to copy where for one stage(), and the buffers it copies
// into. The stagers differ only in which threads run the pieces (blocking_stager.cpp: the caller;
// tbb_stager.cpp: a TBB arena).

#include "device_copies.h"

#include <dcpp/state_dict/state_dict.h>

#include <ATen/core/Tensor.h>

#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace dcpp::detail {

/// What one staging buffer must look like.
struct BufferSpec {
  at::ScalarType dtype;
  std::vector<int64_t> sizes;
  bool pinned;  // page-locked host memory, for tensors on CUDA (only where libtorch has CUDA)
  bool operator==(const BufferSpec& other) const {
    return dtype == other.dtype && sizes == other.sizes && pinned == other.pinned;
  }
};

/// A stager's staging buffers: one contiguous CPU tensor per tensor (or shard) of the last state
/// dict staged, in traversal order. Reused while the specs stay equal; reallocated (the old ones
/// released first, so memory never holds two sets) when they change. With them, the stager's
/// device-to-host copies (its CUDA streams and an event per buffer). Not thread-safe: the stager
/// serialises calls.
class StagingBuffers {
 public:
  const std::vector<at::Tensor>& buffers_for(const std::vector<BufferSpec>& specs);
  int64_t bytes() const { return bytes_; }
  /// How many times buffers were (re)allocated: for tests and logs.
  int64_t allocations() const { return allocations_; }
  DeviceCopies& device_copies() { return device_copies_; }

 private:
  std::vector<BufferSpec> specs_;
  std::vector<at::Tensor> buffers_;
  int64_t bytes_ = 0;
  int64_t allocations_ = 0;
  DeviceCopies device_copies_;
};

/// One stage(). prepare() runs on the caller's thread (Stateful objects' state_dict() is called
/// there); then every piece is copied exactly once, by copy_piece(i) on any thread, pieces in
/// parallel; then finish() on one thread that happens-after every copy_piece.
class StagingJob {
 public:
  /// Resolves Stateful objects, takes buffers from `buffers` and splits the copies into pieces of
  /// at most `piece_bytes`. Enqueues the copies of CUDA tensors on the stager's streams (their
  /// pieces wait for them). Throws CheckpointError naming the key of a value it cannot stage.
  static std::shared_ptr<StagingJob> prepare(const StateDict& state_dict, StagingBuffers& buffers,
                                             int64_t piece_bytes);

  std::size_t piece_count() const { return pieces_.size(); }
  /// Copies piece `index`. Thread-safe for distinct indices; never throws (an error is kept and
  /// thrown by finish()).
  void copy_piece(std::size_t index) noexcept;
  /// Throws the first piece's error as a CheckpointError naming the key.
  void finish();
  /// The staged copy: the state dict's tree over the staging buffers.
  const StateDict& staged() const { return staged_; }
  int64_t bytes() const { return bytes_; }

 private:
  struct Source {
    at::Tensor tensor;
    at::Tensor buffer;
    std::string key;
    bool raw;        // contiguous CPU memory: copied with memcpy in byte ranges
    bool on_device;  // on CUDA: copied by `device_copies` (enqueued in prepare, waited for here)
  };
  struct Piece {
    std::size_t source;
    int64_t begin;  // byte range (raw sources); a non-raw source is one piece
    int64_t end;
  };

  StateDict staged_;
  std::vector<Source> sources_;
  std::vector<Piece> pieces_;
  int64_t bytes_ = 0;
  DeviceCopies* device_copies_ = nullptr;  // the stager's; it outlives its jobs
  std::mutex error_mutex_;
  std::exception_ptr error_;
};

/// Runs `job` on the calling thread: every piece, then finish().
void run_job_inline(StagingJob& job);

}  // namespace dcpp::detail
