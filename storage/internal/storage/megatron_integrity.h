#pragma once
// Megatron-Core's `integrity.json` (`save(..., verify_integrity=True)`):
// {"algorithm": "sha256", "files": {name: hex digest}} over `.metadata`, the data files and
// `metadata.json`. Checked by the megatron-core layout's reader and by `dcpp verify`, written by
// its writer (megatron_storage.h).

#include <filesystem>

namespace dcpp::detail {

/// Whether the checkpoint in `directory` has an `integrity.json`.
bool has_integrity_file(const std::filesystem::path& directory);

/// Checks every file `integrity.json` lists against its SHA-256, reading each whole once. Throws
/// CheckpointError naming the file: kCorrupt for a digest that differs, a listed file that is
/// missing or not a plain name inside the directory, or an `integrity.json` that is not such a
/// JSON object; kIncompatible for an algorithm other than sha256. Without `integrity.json`:
/// nothing.
void check_integrity_file(const std::filesystem::path& directory);

/// Writes `integrity.json` as Megatron-Core's `save_integrity_manifest` does (its bytes:
/// `json.dump(..., indent=2)`): the SHA-256 of every other plain file in `directory`, by name in
/// sorted order; through a temporary file renamed into place (fsynced with `sync`). Throws
/// CheckpointError naming the file that cannot be read or written.
void write_integrity_file(const std::filesystem::path& directory, bool sync);

}  // namespace dcpp::detail
