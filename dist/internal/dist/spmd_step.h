#pragma once
// The steps of save's and load's SPMD protocol. Each runs a part on every rank (or a global part
// on the coordinator) and moves payloads only where they are needed: local plans and write
// results to the coordinator, each rank's final plan to that rank. Every rank still learns every
// rank's outcome, so a failure anywhere becomes the same CheckpointError on every rank; when all
// succeed that costs one all-reduce of a flag, whatever the world size.

#include "dist/collectives.h"

#include <dcpp/core/checkpoint_error.h>

#include <exception>
#include <functional>
#include <string>
#include <vector>

namespace dcpp::detail {

/// Runs `local` (which may throw) on every rank; when every rank succeeded, returns every rank's
/// payload on `coordinator`, indexed by rank, and an empty vector on the others. When any rank
/// failed, every rank throws the same CheckpointError "<operation> failed while <step> (rank 1:
/// ...; rank 3: ...)": of the failed ranks' kind when they all agree, else kRankFailed. An
/// exception that is not a CheckpointError (a user's Stateful or planner) counts as kUsage and
/// keeps its message. A collective that fails (a rank died, a timeout) throws kRankFailed.
/// Blocking; every rank must call it in step.
std::vector<std::string> gather_at_coordinator(Collectives& ranks, int coordinator,
                                               const char* operation, const char* step,
                                               const std::function<std::string()>& local);

/// Runs `local` on every rank and returns when every rank succeeded; throws as
/// gather_at_coordinator does otherwise.
void agree(Collectives& ranks, const char* operation, const char* step,
           const std::function<void()>& local);

/// Runs `global` on `coordinator` alone, which returns one payload per rank (indexed by rank);
/// every rank returns its own. When `global` throws, every rank throws its failure (of its kind),
/// as gather_at_coordinator does.
std::string scatter_from_coordinator(Collectives& ranks, int coordinator, const char* operation,
                                     const char* step,
                                     const std::function<std::vector<std::string>()>& global);

/// Runs `local` on `coordinator` alone and returns its payload on every rank, or throws its
/// failure (of its kind) on every rank.
std::string from_coordinator(Collectives& ranks, int coordinator, const char* operation,
                             const char* step, const std::function<std::string()>& local);

/// Throws the kUsage CheckpointError that these steps throw on N ranks for `error`, an exception
/// that is not a CheckpointError thrown on `rank`, keeping its message.
[[noreturn]] void throw_foreign_failure(int rank, const char* operation, const char* step,
                                        const std::exception_ptr& error);

/// `local()` on a process that exchanges with no other: a CheckpointError passes as it is; any
/// other exception becomes the CheckpointError that the steps would throw on N ranks.
template <typename Local>
auto run_alone(int rank, const char* operation, const char* step, const Local& local) {
  try {
    return local();
  } catch (const CheckpointError&) {
    throw;
  } catch (...) {
    throw_foreign_failure(rank, operation, step, std::current_exception());
  }
}

}  // namespace dcpp::detail
