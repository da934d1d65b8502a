#pragma once
// Reading a checkpoint directory: DCP's `FileSystemReader`.

#include <dcpp/checkpoint/storage_reader.h>

#include <filesystem>
#include <memory>

namespace dcpp {

struct FileSystemReaderOptions {
  /// Threads reading; each takes whole data files.
  int thread_count = 1;
  /// Check what was read. When the checkpoint has dcpp's checksum file (`.checksums`, written by
  /// dcpp's file system writer): `.metadata` against its CRC-32 before it is decoded, and every
  /// item read in full against its CRC-32 (every byte of it: headers, padding, directory). Without
  /// one (checkpoints written by PyTorch): the format's own checks, the zip CRC-32 of every record
  /// and the archive's layout. A read of part of a tensor's storage record (resharding) cannot
  /// check that record's CRC-32 or the item's without reading all of it, and does not; the rest of
  /// the item still gets the format's checks. A damaged checksum file is a CheckpointError that
  /// names it.
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
/// (no "..", no absolute paths): anything else is a CheckpointError. A directory without
/// `.metadata` but with `__<rank>.metadata` files (saved without collectives) reads as the merge of
/// those files, checked against their `__<rank>.checksums` (docs/format.md).
std::unique_ptr<StorageReader> make_filesystem_reader(std::filesystem::path directory,
                                                      FileSystemReaderOptions options = {});

}  // namespace dcpp
