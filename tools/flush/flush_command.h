#pragma once
// `dcpp flush-memory ROOT --ranks N [--job JOB] [--keep]`: the memory tier's newest step of a job
// that is no longer running, committed under its CheckpointManager's root
// (<dcpp/plugin/memory_flush.h>). dcpp-launch runs it when a job it launched with --memory-job
// dies or is stopped.

#include <CLI/CLI.hpp>

namespace dcpp::tools {

/// Adds the `flush-memory` subcommand to `app`. It prints one line (what was written, or why
/// nothing was) and exits 0; errors (bad options, a job of another world size, a failed write)
/// exit 1 through the CLI's error reporting.
void add_flush_memory_command(CLI::App& app);

}  // namespace dcpp::tools
