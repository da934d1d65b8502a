#pragma once
// `dcpp verify CKPT [--json]`: reads every byte of every item of a DCP checkpoint and checks it
// against `.metadata` and itself.

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <ostream>

namespace dcpp::tools {

/// Checks, naming the file and key of each problem found (never throwing for a damaged
/// checkpoint):
/// - the checksum file (`.checksums`, written by dcpp), when present, is intact and `.metadata`
///   matches its CRC-32 there;
/// - `.metadata` exists and decodes; every tensor's chunks lie inside it, do not overlap and cover
///   it; every chunk and value has a storage entry and every storage entry belongs to one;
/// - every file `.metadata` names exists, lies inside the directory and holds its items (an item
///   past the end: truncated); items do not overlap, and no bytes of a file belong to no item;
/// - every item matches its CRC-32 in the checksum file (every byte of it), or, without one, is a
///   `torch.save` archive laid out as PyTorch writes it whose every record matches its CRC-32; a
///   tensor item holds the dtype and shape `.metadata` gives its chunk, a value item decodes;
/// - no `*.distcp` file in the directory is unreferenced.
/// A checkpoint saved without collectives (`__<r>.metadata` per rank, no `.metadata`) is checked as
/// the merge of its ranks' metadata (a gap or a disagreement is a problem), each `__<r>.metadata`
/// against its `__<r>.checksums`, and every item of every rank (replicas included); the report then
/// also has "metadata_files": ["__0.metadata", ...].
/// Returns {"ok": bool, "checkpoint": str, "entries": n, "items": n, "files": n,
/// "bytes_read": n, "checksum_file": "absent"|"checked"|"unusable",
/// "problems": [{"file": str|null, "key": str|null, "problem": str}]}.
/// A Hugging Face directory (no `.metadata`; huggingface_storage.h) gets the checks of
/// `verify_huggingface_directory` instead.
nlohmann::json verify_checkpoint(const std::filesystem::path& checkpoint);

/// A Hugging Face directory: the index and every header as the library's reader checks them,
/// every tensor read in full, no `*.safetensors` file the index leaves out. The same report, with
/// "format": "huggingface" (safetensors carry no checksums: "checksum_file" is "absent").
nlohmann::json verify_huggingface_directory(const std::filesystem::path& directory);

/// The human-readable report: one line per problem, then a summary line.
void print_verification(const nlohmann::json& report, std::ostream& out);

/// Registers the `verify` subcommand on `app`: exit status 0 when no problem was found, 1 if any.
void add_verify_command(CLI::App& app);

}  // namespace dcpp::tools
