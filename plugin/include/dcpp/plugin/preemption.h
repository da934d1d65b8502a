#pragma once
// Preemption signals: a handler that only sets a flag, read at step boundaries.

#include <dcpp/core/export.h>

#include <vector>

namespace dcpp {

/// Installs (sigaction) a handler for each of `signals` (e.g. SIGTERM, SIGUSR1) that only sets a
/// process-wide atomic flag; the previous handlers are kept, for uninstall_preemption_handler to
/// put back (installing again over dcpp's own handler keeps the first previous one). Call from the
/// main thread before training. Throws CheckpointError naming the signal when sigaction fails.
DCPP_API void install_preemption_handler(const std::vector<int>& signals);

/// Puts back, for each of `signals`, the handler that was there before install_preemption_handler
/// (a signal dcpp never handled is left as it is). Call from the main thread.
DCPP_API void uninstall_preemption_handler(const std::vector<int>& signals);

/// Whether a preemption signal arrived (or request_preemption() was called). Lock-free,
/// thread-safe.
DCPP_API bool preemption_requested();

/// Sets the flag as a signal would (tests, or a scheduler's own notice). Thread-safe.
DCPP_API void request_preemption();

/// Clears the flag. Thread-safe.
DCPP_API void clear_preemption_request();

}  // namespace dcpp
