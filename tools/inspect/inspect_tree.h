#pragma once
// The nested view of `dcpp inspect --tree` and the sizes per file and per top-level key.

#include <nlohmann/json.hpp>

#include <filesystem>
#include <ostream>

namespace dcpp::tools {

/// The entries of an inspection nested by their paths: {"model": {"linear.weight": "<flat key>"}}.
/// List indices become string keys ("0"); a leaf is the entry's flat key.
nlohmann::json entry_tree(const nlohmann::json& entries);

/// Adds to `inspection` "files": {name: {"size": bytes on disk or null when missing, "items": n,
/// "bytes": bytes of its items}} and "top_level": {first path element: {"entries": n, "bytes":
/// bytes of their items}}; each entry gets "bytes" (its items' bytes; values from
/// `value_bytes`: flat key -> item length).
void add_sizes(nlohmann::json& inspection, const std::filesystem::path& checkpoint,
               const nlohmann::json& value_bytes);

/// Prints `entry_tree`, one line per node, indented two spaces a level; leaves described as in the
/// flat listing, with their size (and their stats, when the inspection has them).
void print_tree(const nlohmann::json& inspection, std::ostream& out);

/// Prints the "files" and "top_level" sizes.
void print_sizes(const nlohmann::json& inspection, std::ostream& out);

}  // namespace dcpp::tools
