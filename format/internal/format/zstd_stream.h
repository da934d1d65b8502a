#pragma once
// Zstandard frames around data items: DCP's `stream.zstd/1` transform (transform_descriptors.h).
// Writing streams a frame into another sink as the item is written (nothing is buffered beyond
// libzstd's block); reading decompresses a stored item into memory, never past a bound the caller
// derives from `.metadata`, so that a small hostile frame cannot expand into more memory than the
// item may legitimately need.

#include "format/byte_io.h"

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace dcpp::detail {

/// A ByteSink that writes one zstd frame (with its content checksum, without a content size: the
/// size is not known in advance) into `out`. `position()` counts the uncompressed bytes, so codecs
/// that lay out offsets from it (the zip writer) see the item they write. `finish` must be called
/// once, after the last write: it ends the frame. Not thread-safe. Errors are CheckpointErrors.
class ZstdSink final : public ByteSink {
 public:
  /// `level`: zstd's compression level (1..19; 3 is zstd's and python-zstandard's default).
  ZstdSink(ByteSink& out, int level);
  ~ZstdSink() override;
  ZstdSink(const ZstdSink&) = delete;
  ZstdSink& operator=(const ZstdSink&) = delete;

  void write(const void* data, std::size_t size) override;
  uint64_t position() const override { return uncompressed_; }
  void finish();

  /// The frame's bytes written to `out`, and their CRC-32 (what the checksum file records).
  uint64_t stored_length() const { return stored_; }
  uint32_t stored_crc32() const { return crc_; }

 private:
  void drain(int directive, const void* data, std::size_t size);

  struct Context;
  std::unique_ptr<Context> context_;
  ByteSink& out_;
  uint64_t uncompressed_ = 0;
  uint64_t stored_ = 0;
  uint32_t crc_ = 0;
};

/// The zstd frame magic number's bytes, as they start a frame on disk.
bool starts_with_zstd_magic(const void* data, std::size_t size);

/// Decompressed bytes, in memory that was not zero-filled first.
struct ZstdOutput {
  std::unique_ptr<char[]> data;
  std::size_t size = 0;
  std::string_view view() const { return {data.get(), size}; }
};

/// Decompresses the whole of `stored` (one or more zstd frames) into memory, `layers` times
/// (nested frames: DCP's descriptor list can name the transform more than once). Stops, with a
/// CheckpointError naming `stored.describe()` and `bound`, as soon as the output would exceed
/// `bound` bytes; a truncated or corrupted frame (a content checksum that differs included) is a
/// CheckpointError too. Memory: the output (at most `bound` bytes, allocated ahead up to 32 times
/// the input and grown by doubling past that, touched only as far as written) and libzstd's
/// window (reserved up to 128 MiB, zstd's default limit, touched only as far as output is
/// produced). When
/// `stored_crc` is given, it receives the CRC-32 of `stored`'s bytes (read once, in blocks).
ZstdOutput zstd_decompress_bounded(const ByteSource& stored, int layers, uint64_t bound,
                                   uint32_t* stored_crc = nullptr);

/// zstd's own bound on a frame's size for `size` bytes of input (incompressible data grows a
/// little): the bound of an inner layer of nested frames.
uint64_t zstd_frame_bound(uint64_t size);

}  // namespace dcpp::detail
