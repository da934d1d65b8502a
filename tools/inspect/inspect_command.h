#pragma once
// `dcpp inspect CKPT|FILE|ROOT [--json] [--stats] [--tree]`: what a checkpoint holds, and its
// sizes; or the steps of a CheckpointManager's root (manager_root.h).

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <ostream>

namespace dcpp::tools {

/// The `--json` document: {"format": "pytorch-dcp", "version": str|null, "entries": {key: entry}}
/// where a tensor entry has kind, path, dtype, shape and chunks (offsets, sizes, file, offset,
/// length), plus "stats" with `with_stats`; a bytes entry has kind, path and the decoded value;
/// every entry has "bytes" (of its items), and "files" and "top_level" give sizes (inspect_tree.h).
/// `checkpoint` is a DCP or Hugging Face directory, or a torch.save or safetensors file
/// (inspect_file.h). Throws CheckpointError for a missing, incomplete or malformed checkpoint.
nlohmann::json inspect_checkpoint(const std::filesystem::path& checkpoint, bool with_stats);

/// The human-readable listing of the same: one line per entry.
void print_inspection(const nlohmann::json& inspection, std::ostream& out);

/// Registers the `inspect` subcommand on `app`.
void add_inspect_command(CLI::App& app);

}  // namespace dcpp::tools
