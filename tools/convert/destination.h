#pragma once
// Where `dcpp convert` writes: never over anything that exists. Checked before anything is
// written, so a refused conversion leaves what was there exactly as it was.

#include <filesystem>

namespace dcpp::tools {

/// Throws CheckpointError naming `file` when it exists (a file, a directory or anything else).
void require_new_file(const std::filesystem::path& file);

/// Throws CheckpointError naming `directory` when it exists and is not an empty directory.
void require_new_directory(const std::filesystem::path& directory);

}  // namespace dcpp::tools
