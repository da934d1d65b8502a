#pragma once
// The zip archive inside every data item: what `torch.save` writes (stored records only).
//
// Layout written, as PyTorch 2.x's PyTorchStreamWriter: per record a local header with general
// purpose flags 0x0808 (data descriptor, UTF-8) and zero CRC/sizes, an extra field "FB" padding the
// payload to a 64-byte boundary from the start of the archive, the payload, then a data descriptor
// (PK\x07\x08, CRC-32, sizes: 8-byte sizes when the record needs zip64). After the records, the
// central directory, a zip64 end-of-central-directory record and locator, and the classic end
// record.

#include "byte_io.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

namespace dcpp::detail {

/// CRC-32 (zip's polynomial) of `n` bytes, continuing from `crc` (0 to start).
uint32_t crc32(uint32_t crc, const void* data, std::size_t n);
/// The CRC-32 of A followed by B, from the CRC-32s of A and B and the length of B.
uint32_t crc32_combine(uint32_t crc_a, uint32_t crc_b, uint64_t length_b);

struct ZipRecordInfo {
  std::string name;      // without the archive's root folder: "data.pkl", "data/0"
  uint64_t data_offset;  // of the payload, from the start of the archive
  uint64_t size;
  uint32_t crc32;
};

/// Streams a stored-only zip archive to a sink. Records are written in the order they are added,
/// each under `<archive_name>/<name>`. Payloads are written straight from the caller's memory
/// (no copy) while their CRC-32 is computed. Offsets and the 64-byte payload alignment count from
/// the sink's position at construction. Not thread-safe. The archive is complete only after
/// `finish`; after any exception from the sink the writer refuses further calls.
class ZipBlobWriter {
 public:
  /// `archive_name` is the root folder: non-empty, no '/'. Throws CheckpointError otherwise.
  explicit ZipBlobWriter(ByteSink& sink, std::string archive_name = "archive");
  /// Writes one record (blocks until the sink took it; `data` is not kept). Throws
  /// CheckpointError if the sink fails, `finish` was called, or `name` is empty or already added.
  void add(std::string_view name, const void* data, uint64_t size);
  /// Writes the central directory and end records. Returns the archive's total size.
  uint64_t finish();

 private:
  void emit(const void* data, std::size_t size);

  struct Entry {
    std::string name;
    uint64_t header_offset;
    uint64_t size;
    uint32_t crc32;
  };
  ByteSink& sink_;
  std::string archive_name_;
  uint64_t offset_ = 0;  // bytes of this archive written so far
  std::vector<Entry> entries_;
  std::unordered_set<std::string> names_;
  bool finished_ = false;
  bool failed_ = false;  // a sink write threw in the middle of a record
};

/// Reads a zip archive that `source` holds in full. The constructor parses and validates the end
/// records and the central directory (bounds, stored method, one root folder, no duplicate names)
/// and throws CheckpointError naming `source.describe()` on anything malformed; it never reads out
/// of bounds however hostile the bytes. Thread-safe after construction.
class ZipBlobReader {
 public:
  explicit ZipBlobReader(const ByteSource& source);

  /// The records in central directory order (PyTorch: the order they were written).
  const std::vector<ZipRecordInfo>& records() const { return records_; }
  /// The root folder all records are under ("archive" for DCP items), without the '/'.
  const std::string& root() const { return root_; }
  /// The record `name` (relative to the root folder), or nullptr.
  const ZipRecordInfo* find(std::string_view name) const;
  /// Like `find`, but throws CheckpointError naming the record and the source when absent.
  const ZipRecordInfo& get(std::string_view name) const;
  /// Copies the record's payload into `dst` (record.size bytes). With `verify_crc`, throws
  /// CheckpointError naming the record and the source when the CRC-32 differs.
  void read(const ZipRecordInfo& record, void* dst, bool verify_crc) const;
  std::string read_string(const ZipRecordInfo& record, bool verify_crc) const;
  /// Copies bytes [offset, offset + n) of the record's payload into `dst`, without a CRC check.
  /// Throws CheckpointError when the range is not inside the record.
  void read_range(const ZipRecordInfo& record, uint64_t offset, void* dst, std::size_t n) const;

 private:
  void check_range(const ZipRecordInfo& record, uint64_t offset, uint64_t n) const;
  // Reads [offset, offset + size) of the source into `out` block by block; returns the CRC-32 of
  // what it read when `verify_crc` (else 0).
  uint32_t read_blocks(uint64_t offset, uint8_t* out, uint64_t size, bool verify_crc) const;

  const ByteSource& source_;
  std::vector<ZipRecordInfo> records_;
  std::vector<std::size_t> by_name_;  // indexes into records_, sorted by name
  std::string root_;
};

}  // namespace dcpp::detail
