#pragma once
// One step of save's and load's SPMD protocol: every rank runs its part, then every rank learns
// every rank's outcome, so a failure anywhere becomes the same CheckpointError on every rank.

#include "dist/collectives.h"

#include <dcpp/core/checkpoint_error.h>

#include <exception>

#include <functional>
#include <string>
#include <vector>

namespace dcpp::detail {

/// Runs `local` (which may throw) on every rank, exchanges every rank's outcome and returns every
/// rank's payload, indexed by rank. When any rank failed, every rank throws the same
/// CheckpointError "<operation> failed while <step> (rank 1: ...; rank 3: ...)": of the failed
/// ranks' kind when they all agree, else kRankFailed. An exception that is not a CheckpointError
/// (a user's Stateful or planner) counts as kUsage and keeps its message. A collective that fails
/// (a rank died, a timeout) throws kRankFailed. Blocking; every rank must call it in step.
std::vector<std::string> exchange(Collectives& ranks, const char* operation, const char* step,
                                  const std::function<std::string()>& local);

/// Runs `local` on `coordinator` alone and returns its payload on every rank, or throws its
/// failure (of its kind) on every rank, as `exchange` does.
std::string from_coordinator(Collectives& ranks, int coordinator, const char* operation,
                             const char* step, const std::function<std::string()>& local);

/// Throws the kUsage CheckpointError that `exchange` throws on N ranks for `error`, an exception
/// that is not a CheckpointError thrown on `rank`, keeping its message.
[[noreturn]] void throw_foreign_failure(int rank, const char* operation, const char* step,
                                        const std::exception_ptr& error);

/// `local()` on a process that exchanges with no other: a CheckpointError passes as it is; any
/// other exception becomes the CheckpointError that `exchange` would throw on N ranks.
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
