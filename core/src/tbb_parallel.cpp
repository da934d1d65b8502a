// tbb::parallel_for's templates, instantiated here alone (core/tbb_parallel.h).

#include "core/tbb_parallel.h"

#include <oneapi/tbb/blocked_range.h>
#include <oneapi/tbb/parallel_for.h>
#include <oneapi/tbb/task_arena.h>

namespace dcpp::detail {

void parallel_for_in_arena(tbb::task_arena& arena, std::size_t count,
                           void (*body)(void* context, std::size_t begin, std::size_t end),
                           void* context) {
  arena.execute([&] {
    tbb::parallel_for(tbb::blocked_range<std::size_t>(0, count, 1),
                      [&](const tbb::blocked_range<std::size_t>& range) {
                        body(context, range.begin(), range.end());
                      });
  });
}

}  // namespace dcpp::detail
