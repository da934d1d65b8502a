#pragma once
// How DCP's data files are cut and written (files per rank, threads, compression), whatever
// driver stores them: the options of a save, apart from the writer that applies them.

#include <dcpp/core/export.h>

namespace dcpp {

/// How data items are stored. kZstd is DCP's `stream.zstd/1` transform (PyTorch 2.14's
/// `FileSystemWriter(_extensions=[ZStandard()])`): each item's torch.save archive in one zstd
/// frame, which PyTorch 2.14's `dcp.load` reads when python-zstandard or pyzstd is installed;
/// older PyTorch cannot read such checkpoints.
enum class Compression { kNone, kZstd };

struct DCPP_API FileSystemWriterOptions {
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
  /// Compress every item (kZstd), at `compression_level` (zstd's levels, 1 to 19; 3 is zstd's
  /// default: fast, and most of the gain). The checksum file's CRC-32s cover the stored,
  /// compressed bytes; each frame also carries zstd's own content checksum.
  Compression compression = Compression::kNone;
  int compression_level = 3;

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
  FileSystemWriterOptions& with_compression(Compression c, int level = 3) {
    compression = c;
    compression_level = level;
    return *this;
  }
};

}  // namespace dcpp
