// Walks the archive from its first byte: local header, payload (skipped), data descriptor, next
// local header, ..., central directory, zip64 end record and locator, end record. ZipBlobReader's
// constructor has already bounded every offset used here against the source.

#include "format/zip/zip_layout_check.h"

#include "format/zip/zip_format.h"

#include <dcpp/core/checkpoint_error.h>

#include <algorithm>
#include <vector>

namespace dcpp::detail {

namespace {

using namespace zip;

constexpr uint16_t kPaddingExtraId = 0x4246;  // "FB": PyTorch's alignment padding

class LayoutCheck {
 public:
  explicit LayoutCheck(const ZipBlobReader& zip) : zip_(zip), source_(zip.source()) {}

  void run() {
    const ZipLayout& layout = zip_.layout();
    std::vector<uint8_t> directory(static_cast<std::size_t>(layout.directory_size));
    source_.read(layout.directory_offset, directory.data(), directory.size());
    uint64_t next = 0;  // where the next record's local header must start
    std::size_t at = 0;
    for (const ZipRecordInfo& record : zip_.records()) {
      const uint8_t* central = directory.data() + at;
      at += kCentralHeaderSize + get16(central + central_header::kNameSize) +
            get16(central + central_header::kExtraSize) +
            get16(central + central_header::kCommentSize);
      check_central(record, central);
      if (record.header_offset != next) {
        fail("record '" + record.name + "' starts at byte " + std::to_string(record.header_offset) +
             ", not right after the previous record (byte " + std::to_string(next) + ")");
      }
      next = check_local(record, central);
    }
    if (layout.directory_offset != next) {
      fail("the central directory starts at byte " + std::to_string(layout.directory_offset) +
           ", not right after the last record (byte " + std::to_string(next) + ")");
    }
    check_end_records(layout);
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw CheckpointError(ErrorKind::kCorrupt,
                          source_.describe() +
                              ": the zip archive is not laid out as torch.save writes it (" + what +
                              "); the data is corrupted: restore the file or load an earlier "
                              "checkpoint");
  }

  void expect(bool ok, const ZipRecordInfo& record, const char* what) const {
    if (!ok) fail("record '" + record.name + "': " + what);
  }

  void check_central(const ZipRecordInfo& record, const uint8_t* h) const {
    namespace c = central_header;
    expect(get16(h + c::kVersionMadeBy) == 0, record,
           "central directory entry: version made by is not 0");
    expect(get16(h + c::kCommentSize) == 0, record, "central directory entry has a comment");
    expect(get16(h + c::kInternalAttributes) == 0 && get32(h + c::kExternalAttributes) == 0, record,
           "central directory entry: file attributes are not 0");
    // The extra field: at most one zip64 field, holding exactly the saturated values.
    const std::size_t name_size = get16(h + c::kNameSize);
    const std::size_t extra_size = get16(h + c::kExtraSize);
    const std::size_t wide = (get32(h + c::kUncompressedSize) == kMax32) +
                             (get32(h + c::kCompressedSize) == kMax32) +
                             (get32(h + c::kLocalHeaderOffset) == kMax32);
    if (extra_size == 0) {
      expect(wide == 0, record, "central directory entry lacks its zip64 field");
      return;
    }
    const uint8_t* extra = h + kCentralHeaderSize + name_size;
    expect(
        extra_size == 4 + 8 * wide && get16(extra) == kZip64ExtraId && get16(extra + 2) == 8 * wide,
        record, "central directory entry: unexpected extra field");
  }

  // Checks the record's local header and data descriptor; returns the offset after them.
  uint64_t check_local(const ZipRecordInfo& record, const uint8_t* central) const {
    std::vector<uint8_t> local(static_cast<std::size_t>(record.data_offset - record.header_offset));
    source_.read(record.header_offset, local.data(), local.size());
    namespace c = central_header;
    namespace h = local_header;
    const uint8_t* l = local.data();
    const uint16_t flags = get16(l + h::kFlags);
    expect(get16(l + h::kVersionNeeded) == get16(central + c::kVersionNeeded), record,
           "local header: version needed differs from the central directory");
    expect(flags == get16(central + c::kFlags), record,
           "local header: flags differ from the central directory");
    expect(get16(l + h::kMethod) == get16(central + c::kMethod), record,
           "local header: method differs from the central directory");
    expect(get16(l + h::kTime) == get16(central + c::kTime) &&
               get16(l + h::kDate) == get16(central + c::kDate),
           record, "local header: time or date differs from the central directory");
    const bool descriptor = (flags & kFlagDataDescriptor) != 0;
    const uint32_t crc = get32(l + h::kCrc32);
    const uint32_t compressed = get32(l + h::kCompressedSize);
    const uint32_t uncompressed = get32(l + h::kUncompressedSize);
    if (descriptor) {
      expect(crc == 0 && compressed == 0 && uncompressed == 0, record,
             "local header: CRC-32 and sizes are not the zeros a data descriptor stands for");
    } else {
      expect(crc == record.crc32, record,
             "local header: CRC-32 differs from the central directory");
      expect(compressed == std::min(record.size, kMax32) &&
                 uncompressed == std::min(record.size, kMax32),
             record, "local header: sizes differ from the central directory");
    }

    // Extra fields: a zip64 field and PyTorch's "FB" padding, back to back, filling the field.
    const std::size_t name_size = get16(l + h::kNameSize);
    const std::size_t extra_size = get16(l + h::kExtraSize);
    const uint8_t* extra = l + kLocalHeaderSize + name_size;
    bool zip64 = false;
    for (std::size_t e = 0; e < extra_size;) {
      expect(extra_size - e >= 4, record, "local header: truncated extra field");
      const uint16_t id = get16(extra + e);
      const std::size_t n = get16(extra + e + 2);
      expect(extra_size - e - 4 >= n, record, "local header: extra field out of bounds");
      const uint8_t* value = extra + e + 4;
      if (id == kZip64ExtraId) {
        zip64 = true;
        check_local_zip64(record, value, n);
      } else if (id == kPaddingExtraId) {
        for (std::size_t i = 0; i < n; ++i) {
          expect(value[i] == 'Z', record, "local header: alignment padding is not 'Z' bytes");
        }
      } else {
        fail("record '" + record.name + "': local header: unexpected extra field " +
             std::to_string(id));
      }
      e += 4 + n;
    }

    uint64_t end = record.data_offset + record.size;
    if (!descriptor) return end;
    const std::size_t width = zip64 ? 8 : 4;
    uint8_t d[4 + 4 + 8 + 8];
    const uint64_t limit = zip_.layout().directory_offset;
    expect(limit - end >= 4 + 4 + 2 * width, record, "data descriptor out of bounds");
    source_.read(end, d, static_cast<std::size_t>(4 + 4 + 2 * width));
    // The signature is optional in the zip format; miniz always writes it.
    expect(get32(d) == kDataDescriptorSig, record, "data descriptor signature missing");
    const uint64_t size_a = width == 8 ? get64(d + 8) : get32(d + 8);
    const uint64_t size_b = width == 8 ? get64(d + 8 + width) : get32(d + 8 + width);
    expect(get32(d + 4) == record.crc32, record,
           "data descriptor: CRC-32 differs from the central directory");
    expect(size_a == record.size && size_b == record.size, record,
           "data descriptor: sizes differ from the central directory");
    return end + 4 + 4 + 2 * width;
  }

  // miniz's local zip64 field: the size, then a compressed size of 0 or the size, then the header
  // offset when that does not fit 32 bits.
  void check_local_zip64(const ZipRecordInfo& record, const uint8_t* value, std::size_t n) const {
    expect(n == 16 || n == 24 || n == 8, record, "local header: malformed zip64 field");
    if (n == 8) {
      expect(get64(value) == record.header_offset, record,
             "local header: zip64 offset differs from the central directory");
      return;
    }
    expect(
        get64(value) == record.size && (get64(value + 8) == 0 || get64(value + 8) == record.size),
        record, "local header: zip64 sizes differ from the central directory");
    if (n == 24) {
      expect(get64(value + 16) == record.header_offset, record,
             "local header: zip64 offset differs from the central directory");
    }
  }

  void check_end_records(const ZipLayout& layout) const {
    uint64_t next = layout.directory_offset + layout.directory_size;
    if (layout.has_zip64_end) {
      if (layout.zip64_end_offset != next) {
        fail("bytes between the central directory and the zip64 end record");
      }
      uint8_t z[kZip64EndSize];
      source_.read(layout.zip64_end_offset, z, sizeof(z));
      if (get64(z + zip64_end::kRecordSize) != kZip64EndSize - 12) {
        fail("the zip64 end record has extensible data");
      }
      // What miniz has always written here, since its first zip64 support.
      if (get16(z + zip64_end::kVersionMadeBy) != 0x031E ||
          get16(z + zip64_end::kVersionNeeded) != 0x002D) {
        fail("the zip64 end record's versions are not miniz's (made by 0x031e, needed 45)");
      }
      next += kZip64EndSize;
      uint8_t locator[kZip64LocatorSize];
      if (layout.end_offset < kZip64LocatorSize || layout.end_offset - kZip64LocatorSize != next) {
        fail("bytes between the zip64 end record and its locator");
      }
      source_.read(next, locator, sizeof(locator));
      if (get32(locator + zip64_locator::kDisks) != 1) {
        fail("the zip64 locator does not count one disk");
      }
      next += kZip64LocatorSize;
    }
    if (layout.end_offset != next) {
      fail("bytes between the central directory and the end record");
    }
    if (layout.end_offset + kEndSize != source_.size()) {
      fail("the end record has a comment");
    }
    // The classic fields hold the values, saturated only when they do not fit (the constructor
    // accepts a saturated value whatever the zip64 record says).
    uint8_t end[kEndSize];
    source_.read(layout.end_offset, end, sizeof(end));
    const uint64_t count = zip_.records().size();
    if (get16(end + 8) != std::min(count, kMax16) || get16(end + 10) != std::min(count, kMax16) ||
        get32(end + 12) != std::min(layout.directory_size, kMax32) ||
        get32(end + 16) != std::min(layout.directory_offset, kMax32)) {
      fail("the end record's counts or offsets differ from the central directory's");
    }
  }

  const ZipBlobReader& zip_;
  const ByteSource& source_;
};

}  // namespace

void check_pytorch_layout(const ZipBlobReader& zip) { LayoutCheck(zip).run(); }

}  // namespace dcpp::detail
