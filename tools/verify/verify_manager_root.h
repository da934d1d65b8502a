#pragma once
// `dcpp verify ROOT [--step N]` on the root of a CheckpointManager (manager_root.h): every
// committed checkpoint under it verified as `dcpp verify` verifies one, with a result per step.

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <ostream>

namespace dcpp::tools {

/// verify_checkpoint (verify_command.h) on every committed directory of the root, full
/// checkpoints and exports alike, ascending by step; with `step`, on that step's only. Returns
/// {"ok": bool, "format": "dcpp-manager-root", "root": str,
///  "checkpoints": [{"directory": name, "step": n, "kind": "full"|"export",
///                   "report": verify_checkpoint's report}],
///  "skipped": [{"directory": name, "step": n, "state": "incomplete"|"deleting"}],
///  "problem": str|null}.
/// "skipped" lists what the manager never committed or is deleting: no resume loads it, so it is
/// not verified. "ok" is true when at least one checkpoint was verified and every one is ok;
/// "problem" says why nothing was verified (no committed checkpoint, none of step `step`).
/// Never throws for a damaged checkpoint.
nlohmann::json verify_manager_root(const std::filesystem::path& root, std::optional<int64_t> step);

/// The human-readable report: each checkpoint's verification under a line naming its step, the
/// skipped directories, then a summary line.
void print_manager_root_verification(const nlohmann::json& report, std::ostream& out);

}  // namespace dcpp::tools
