#pragma once
// Running independent pieces of work (one per data file) on a few threads.

#include <cstddef>
#include <functional>

namespace dcpp::detail {

/// Calls `work(i)` for every i in [0, count), on up to `threads` threads (the caller's included),
/// each taking the next index. Blocks until every call returned. When a call throws, indices not
/// yet started are skipped and the first exception is rethrown to the caller; nothing escapes a
/// thread. When threads cannot be started (a thread limit, no memory for a stack), the ones
/// that did start, and the caller's, do all the work: fewer threads, never std::terminate. The
/// threads work on the caller's current CUDA device and streams (core/caller_streams.h).
void parallel_for(std::size_t count, int threads, const std::function<void(std::size_t)>& work);

}  // namespace dcpp::detail
