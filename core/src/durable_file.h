#pragma once
// Durable file-system steps of the commit protocol: write-fsync-rename of a small file, fsync of a
// directory, rename of a directory made durable.

#include <filesystem>
#include <string>

namespace dcpp::detail {

/// Writes `bytes` to `path` through `path.tmp`: write, fsync, rename, fsync of the parent
/// directory. Blocking; throws CheckpointError naming the path.
void write_file_durably(const std::filesystem::path& path, const std::string& bytes, bool sync);

/// fsync of a directory (its entries: a rename in it is durable afterwards). Throws
/// CheckpointError naming the directory.
void sync_directory(const std::filesystem::path& directory);

/// Renames `from` to `to` (same file system) and, with `sync`, fsyncs their parent directory.
/// Throws CheckpointError naming both.
void rename_durably(const std::filesystem::path& from, const std::filesystem::path& to, bool sync);

}  // namespace dcpp::detail
