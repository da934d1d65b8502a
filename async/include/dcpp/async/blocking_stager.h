#pragma once
// The blocking stager: copies on the calling thread (DCP's `BlockingAsyncStager`).

#include <dcpp/async/async_stager.h>
#include <dcpp/core/export.h>

#include <cstdint>
#include <memory>

namespace dcpp {

/// Options of make_blocking_stager().
struct DCPP_API BlockingStagerOptions {
  /// Largest piece of a tensor copied at once (bytes).
  int64_t piece_bytes = int64_t{4} << 20;

  BlockingStagerOptions& with_piece_bytes(int64_t bytes) {
    piece_bytes = bytes;
    return *this;
  }
};

/// Copies on the thread that calls stage(), which returns when the copy is done (its future is
/// ready): training stops for one memcpy of the state. The simplest choice and the fastest copy
/// when the training loop has nothing else to do meanwhile.
DCPP_API std::unique_ptr<AsyncStager> make_blocking_stager(BlockingStagerOptions options = {});

}  // namespace dcpp
