#pragma once
// tbb::parallel_for inside a task arena, behind a plain function, so that TBB's templates are
// compiled in one translation unit that is kept free of ThreadSanitizer instrumentation.
//
// Why: Debian's libtbb is not instrumented, so TSan cannot see the synchronisation of TBB's task
// spawning and stealing; but parallel_for's templates (partitioner, task objects) would be
// instrumented wherever they are instantiated, and TSan would report TBB's own hand-offs as races.
// core/src/tbb_parallel.cpp is compiled with -fno-sanitize=thread under DCPP_SANITIZE=thread, so
// all of TBB is uninstrumented alike; dcpp's code on either side of this call stays instrumented
// and annotates the hand-offs it relies on (tsan_annotations.h). Users: the TBB stager (async) and
// the memory tier's slots (storage), through the dcpp_core_tbb library.

#include <oneapi/tbb/task_arena.h>

#include <cstddef>

namespace dcpp::detail {

/// Calls body(context, begin, end) for disjoint ranges covering [0, count), on the threads of
/// `arena` (the calling thread joins it), and returns when all have returned. `body` must not
/// throw.
void parallel_for_in_arena(tbb::task_arena& arena, std::size_t count,
                           void (*body)(void* context, std::size_t begin, std::size_t end),
                           void* context);

}  // namespace dcpp::detail
