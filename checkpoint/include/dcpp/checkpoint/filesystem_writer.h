#pragma once
// Writing a checkpoint directory: DCP's `FileSystemWriter`.

#include <dcpp/checkpoint/storage_writer.h>

#include <filesystem>
#include <memory>

namespace dcpp {

struct FileSystemWriterOptions {
  /// Threads writing this rank's files; each writes its own file `__<rank>_<n>.distcp`.
  int thread_count = 1;
  /// One file per rank (per writer thread), or one file per item.
  bool single_file_per_rank = true;
  /// fsync data files, `.metadata` and the directory. Off only for scratch checkpoints.
  bool sync_files = true;
  /// Allow saving into a directory that already holds a checkpoint. The old checkpoint stays
  /// intact and loadable until the new `.metadata` replaces it; its data files are removed after.
  /// When false, such a save is refused with a CheckpointError.
  bool overwrite = false;
  /// Write dcpp's checksum file `.checksums` beside `.metadata`: the CRC-32 of `.metadata` and of
  /// every item's bytes, computed as they are written, with which loads and `dcpp verify` find any
  /// damaged byte (docs/format.md). Python's DCP ignores the file.
  bool checksum_file = true;

  FileSystemWriterOptions& with_thread_count(int n) {
    thread_count = n;
    return *this;
  }
  FileSystemWriterOptions& with_single_file_per_rank(bool v) {
    single_file_per_rank = v;
    return *this;
  }
  FileSystemWriterOptions& with_sync_files(bool v) {
    sync_files = v;
    return *this;
  }
  FileSystemWriterOptions& with_overwrite(bool v) {
    overwrite = v;
    return *this;
  }
  FileSystemWriterOptions& with_checksum_file(bool v) {
    checksum_file = v;
    return *this;
  }
};

/// Writes DCP's directory layout: data files, then (coordinator) the checksum file
/// (`.checksums.tmp`, fsync, rename to `.checksums`, fsync of the directory), then `.metadata.tmp`,
/// fsync, rename to
/// `.metadata`, fsync of the directory. Creates the directory if needed.
std::unique_ptr<StorageWriter> make_filesystem_writer(std::filesystem::path directory,
                                                      FileSystemWriterOptions options = {});

}  // namespace dcpp
