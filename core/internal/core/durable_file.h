#pragma once
// Durable file-system steps of the commit protocols: fsync of a directory, write-fsync-rename of a
// small file, rename of a file or directory made durable. The one definition of each, shared by
// the checkpoint writers (checkpoint/) and CheckpointManager (plugin/) through
// dcpp_core_internals.

#include <filesystem>
#include <string>

namespace dcpp::detail {

/// fsync of a directory (its entries: a rename or creation in it is durable afterwards). Blocking;
/// throws CheckpointError naming the directory.
void sync_directory(const std::filesystem::path& directory);

/// Writes `bytes` to `path` through `path.tmp`: write, fsync, rename, fsync of the parent
/// directory (the fsyncs only with `sync`). Blocking; throws CheckpointError naming the path.
void write_file_durably(const std::filesystem::path& path, const std::string& bytes, bool sync);

/// Renames `from` to `to` (same file system) and, with `sync`, fsyncs their parent directory.
/// Throws CheckpointError naming both.
void rename_durably(const std::filesystem::path& from, const std::filesystem::path& to, bool sync);

}  // namespace dcpp::detail
