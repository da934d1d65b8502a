#pragma once
// The TBB-threaded stager: copies on a TBB task arena of a few low-priority threads, returning at
// once with a future.

#include <dcpp/async/async_stager.h>
#include <dcpp/core/export.h>

#include <cstdint>
#include <memory>

namespace dcpp {

/// Options of make_tbb_stager().
struct DCPP_API TbbStagerOptions {
  /// Threads copying at once (the TBB arena's concurrency, its own driver thread included);
  /// at least 1. Keep it below the core count so the training loop keeps its cores.
  int concurrency = 1;
  /// Nice value given to the copying threads (0 to 19; higher is lower priority), so they yield
  /// the CPU to the training loop's threads (libtorch's intra-op pool). 0 leaves them as they are.
  /// The default, 19, copies only on CPU time the training loop leaves idle: while the loop keeps
  /// every core busy, staging takes longer (docs/performance.md has figures).
  /// TBB worker threads keep the lowered priority after the copy (Linux does not let an
  /// unprivileged process raise it back): use a separate TBB-using library's arena with care.
  int nice = 19;
  /// Largest piece of a tensor copied at once (bytes): the unit of parallel work.
  int64_t piece_bytes = int64_t{4} << 20;
  /// should_synchronize_after_execute(): false makes async_save return at once.
  bool synchronize_after_execute = false;

  TbbStagerOptions& with_concurrency(int n) {
    concurrency = n;
    return *this;
  }
  TbbStagerOptions& with_nice(int value) {
    nice = value;
    return *this;
  }
  TbbStagerOptions& with_piece_bytes(int64_t bytes) {
    piece_bytes = bytes;
    return *this;
  }
  TbbStagerOptions& with_synchronize_after_execute(bool value) {
    synchronize_after_execute = value;
    return *this;
  }
};

/// Copies on a TBB task arena of `options.concurrency` threads. stage() resolves Stateful
/// objects and (re)allocates buffers on the calling thread, then returns at once; the copy runs in
/// the background and completes the future. The destructor waits for stages in progress.
DCPP_API std::unique_ptr<AsyncStager> make_tbb_stager(TbbStagerOptions options = {});

}  // namespace dcpp
