#pragma once
// Writing the zip archive inside every data item, as `torch.save` does (stored records only; the
// layout is described in zip_format.h).

#include "format/byte_io.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

namespace dcpp::detail {

/// Streams a stored-only zip archive to a sink. Records are written in the order they are added,
/// each under `<archive_name>/<name>`. Payloads are written straight from the caller's memory
/// (no copy) while their CRC-32 is computed. Offsets and the 64-byte payload alignment count from
/// the sink's position at construction. Not thread-safe. The archive is complete only after
/// `finish`; after any exception from the sink the writer refuses further calls.
class ZipBlobWriter {
 public:
  /// `archive_name` is the root folder: non-empty, no '/'. Throws CheckpointError otherwise.
  explicit ZipBlobWriter(ByteSink& sink, std::string archive_name = "archive");
  /// Writes one record (blocks until the sink took it; `data` is not kept) and returns the CRC-32
  /// of its payload. Throws CheckpointError if the sink fails, `finish` was called, or `name` is
  /// empty or already added.
  uint32_t add(std::string_view name, const void* data, uint64_t size);
  /// Writes the central directory and end records. Returns the archive's total size.
  uint64_t finish();
  /// The CRC-32 of every byte of the archive written so far (the whole archive after `finish`),
  /// at no extra pass over the payloads: their record CRC-32s are folded in.
  uint32_t archive_crc32() const { return archive_crc_; }

 private:
  // Writes bytes of the archive's structure (headers, descriptors, directory), checksummed here.
  void emit(const void* data, std::size_t size);
  // Writes payload bytes, whose CRC-32 the caller computes and folds in with `fold_payload`.
  void emit_payload(const void* data, std::size_t size);
  void fold_payload(uint32_t crc, uint64_t size);

  struct Entry {
    std::string name;
    uint64_t header_offset;
    uint64_t size;
    uint32_t crc32;
  };
  ByteSink& sink_;
  std::string archive_name_;
  uint64_t offset_ = 0;  // bytes of this archive written so far
  uint32_t archive_crc_ = 0;
  std::vector<Entry> entries_;
  std::unordered_set<std::string> names_;
  bool finished_ = false;
  bool failed_ = false;  // a sink write threw in the middle of a record
};

}  // namespace dcpp::detail
