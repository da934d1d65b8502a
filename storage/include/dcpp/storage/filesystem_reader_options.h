#pragma once
// How a checkpoint is read and checked (threads, checksums, bounds), whatever driver holds it: the
// options of a load, apart from the reader that applies them.

#include <dcpp/core/export.h>

#include <cstdint>

namespace dcpp {

struct DCPP_API FileSystemReaderOptions {
  /// Threads reading; each takes whole data files.
  int thread_count = 1;
  /// Check what was read. When the checkpoint has dcpp's checksum file (`.checksums`, written by
  /// dcpp's file system writer): `.metadata` against its CRC-32 before it is decoded, and every
  /// item read in full against its CRC-32 (every byte of it: headers, padding, directory). Without
  /// one (checkpoints written by PyTorch): the format's own checks, the zip CRC-32 of every record
  /// and the archive's layout. A read of part of a tensor's storage record (resharding) cannot
  /// check that record's CRC-32 or the item's without reading all of it, and does not; the rest of
  /// the item still gets the format's checks. A damaged checksum file is a CheckpointError that
  /// names it. A zstd-compressed item's checksum covers its stored (compressed) bytes: they are
  /// checked as they are decompressed, and the archive inside then needs no check of its own;
  /// without a checksum file, the frame's own content checksum (when it has one) and the
  /// archive's checks apply. Tensors of DCP's SAFETENSORS format have no checksums of their own;
  /// their header is checked against `.metadata`.
  bool verify_checksums = true;
  /// The most bytes a zstd-compressed value (a bytes item: a pickled Python value, DCP's
  /// `stream.zstd/1`) may decompress to. A value has no size in `.metadata`, so this bounds the
  /// memory a damaged or hostile frame can take; past it the load fails with a CheckpointError
  /// that names the file, the key and the bound. A tensor item's bound follows from `.metadata`
  /// instead: its chunk's bytes plus a small allowance for the torch.save archive around them.
  uint64_t max_decompressed_value_size = uint64_t{1} << 30;

  FileSystemReaderOptions& with_thread_count(int n) {
    thread_count = n;
    return *this;
  }
  FileSystemReaderOptions& with_verify_checksums(bool v) {
    verify_checksums = v;
    return *this;
  }
  FileSystemReaderOptions& with_max_decompressed_value_size(uint64_t bytes) {
    max_decompressed_value_size = bytes;
    return *this;
  }
};

}  // namespace dcpp
