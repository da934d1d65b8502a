#pragma once
// Reading the zip archive inside every data item, hostile input included.

#include "format/byte_io.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace dcpp::detail {

struct ZipRecordInfo {
  std::string name;      // without the archive's root folder: "data.pkl", "data/0"
  uint64_t data_offset;  // of the payload, from the start of the archive
  uint64_t size;
  uint32_t crc32;          // as the central directory records it
  uint64_t header_offset;  // of the record's local header
};

/// Where an archive's directory and end records lie, from the start of the archive.
struct ZipLayout {
  uint64_t directory_offset = 0;
  uint64_t directory_size = 0;
  bool has_zip64_end = false;
  uint64_t zip64_end_offset = 0;  // when has_zip64_end
  uint64_t end_offset = 0;        // of the end of central directory record
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
  const ZipLayout& layout() const { return layout_; }
  const ByteSource& source() const { return source_; }
  /// The record `name` (relative to the root folder), or nullptr.
  const ZipRecordInfo* find(std::string_view name) const;
  /// Like `find`, but throws CheckpointError naming the record and the source when absent.
  const ZipRecordInfo& get(std::string_view name) const;
  /// Copies the record's payload into `dst` (record.size bytes). With `verify_crc`, throws
  /// CheckpointError naming the record and the source when the CRC-32 differs, and returns the
  /// CRC-32 of the payload (0 without `verify_crc`).
  uint32_t read(const ZipRecordInfo& record, void* dst, bool verify_crc) const;
  /// Reads the record's payload through the CRC-32 (in blocks, nothing kept) and throws
  /// CheckpointError naming the record and the source when it differs from the directory's.
  void check_crc(const ZipRecordInfo& record) const;
  std::string read_string(const ZipRecordInfo& record, bool verify_crc) const;
  /// Copies bytes [offset, offset + n) of the record's payload into `dst`, without a CRC check.
  /// Throws CheckpointError when the range is not inside the record.
  void read_range(const ZipRecordInfo& record, uint64_t offset, void* dst, std::size_t n) const;

 private:
  // Sorts the records by name into by_name_; throws when a name appears twice.
  void index_by_name();
  void check_range(const ZipRecordInfo& record, uint64_t offset, uint64_t n) const;
  // Reads [offset, offset + size) of the source into `out` block by block; returns the CRC-32 of
  // what it read when `verify_crc` (else 0).
  uint32_t read_blocks(uint64_t offset, uint8_t* out, uint64_t size, bool verify_crc) const;

  const ByteSource& source_;
  std::vector<ZipRecordInfo> records_;
  std::vector<std::size_t> by_name_;  // indexes into records_, sorted by name
  std::string root_;
  ZipLayout layout_;
};

}  // namespace dcpp::detail
