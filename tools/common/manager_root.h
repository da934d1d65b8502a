#pragma once
// `dcpp inspect ROOT` on the root of a CheckpointManager (docs/plugin.md): its step directories
// with what their manifests (`dcpp_checkpoint.json`) say, read without loading any checkpoint.

#include <nlohmann/json.hpp>

#include <filesystem>
#include <ostream>

namespace dcpp::tools {

/// True when `directory` is no checkpoint itself (no `.metadata`, no per-rank `__0.metadata`, not
/// a Hugging Face directory) but holds a directory a CheckpointManager names:
/// `step-<8+ digits>` or `export-step-<8+ digits>`, maybe with `.incomplete` or `.deleting`.
bool is_manager_root(const std::filesystem::path& directory);

/// {"format": "dcpp-manager-root", "root": str, "checkpoints": [{"directory": name, "step": n,
///  "kind": "full"|"export", "committed": bool, "state": "committed"|"incomplete"|"deleting",
///  "epoch": n|null, "committed_at": seconds since the Unix epoch|null,
///  "metrics": {name: number}|null, "size": bytes of its files on disk, and "problem": the error
///  when its manifest cannot be read}]}, ascending by step (a full checkpoint before the export of
///  its step). Committed, as the manager decides: named without a suffix, with `.metadata` and a
///  readable manifest; otherwise "incomplete", or "deleting" for `.deleting`. The step, kind,
///  epoch, time and metrics come from the manifest; without one, step and kind from the name and
///  the rest null. Reads no checkpoint.
nlohmann::json inspect_manager_root(const std::filesystem::path& root);

/// The latest committed full checkpoint of `listing` (else its last directory; else the root),
/// under its root: what to inspect instead of the root.
std::filesystem::path example_step_directory(const nlohmann::json& listing);

/// The listing: a summary line, a header and one line per directory.
void print_manager_root(const nlohmann::json& listing, std::ostream& out);

}  // namespace dcpp::tools
