#pragma once
// Reading a checkpoint directory: DCP's `FileSystemReader`.

#include <dcpp/checkpoint/storage_reader.h>

#include <filesystem>
#include <memory>

namespace dcpp {

struct FileSystemReaderOptions {
  /// Threads reading; each takes whole data files.
  int thread_count = 1;
  /// Check the zip CRC-32 of every record read in full. A read of part of a record (resharding)
  /// cannot be checked without reading all of it and is not.
  bool verify_checksums = true;

  FileSystemReaderOptions& with_thread_count(int n) {
    thread_count = n;
    return *this;
  }
  FileSystemReaderOptions& with_verify_checksums(bool v) {
    verify_checksums = v;
    return *this;
  }
};

/// Reads DCP's directory layout. Paths in `.metadata` must name files inside `directory`
/// (no "..", no absolute paths): anything else is a CheckpointError.
std::unique_ptr<StorageReader> make_filesystem_reader(std::filesystem::path directory,
                                                      FileSystemReaderOptions options = {});

}  // namespace dcpp
