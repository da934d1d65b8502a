#pragma once
// The zip layout of a data item, byte-compatible with PyTorch's PyTorchStreamWriter (miniz):
// the constants and field codecs the writer and the reader share.
//
// Design note: the layout, as PyTorch 2.x writes it (caffe2/serialize/inline_container.cc calling
// miniz 3.0.2 with MZ_ZIP_FLAG_WRITE_ZIP64 and MINIZ_NO_TIME), all integers little-endian, every
// offset relative to the start of the archive:
//   per record, in the order written:
//     local header (30 bytes): PK\3\4, version needed 0, flags, method 0, time 0, date 0, CRC 0,
//       sizes 0, name length, extra length. flags = 0x0808 (data descriptor follows, UTF-8 name),
//       or 0x0800 for an empty record, which gets no data descriptor.
//     name "<root>/<record>"
//     zip64 extra (id 1), only when the size or the header offset is >= 0xFFFFFFFF: the size and
//       a compressed size of 0 when the size is, then the header offset when it is.
//     "FB" extra: 'Z' bytes padding the payload to a multiple of 64 from the archive start.
//     payload (stored)
//     data descriptor, when the record is not empty: PK\7\8, CRC-32, compressed and uncompressed
//       size, 4 bytes each, or 8 bytes each when the record got a zip64 extra.
//   central directory: per record PK\1\2, made-by 0, needed 0, the local flags, method/time/date 0,
//     CRC, sizes and header offset (0xFFFFFFFF when they do not fit), name, and a zip64 extra with
//     size, size and offset for the fields that do not fit; no comment, attributes 0.
//   zip64 end of central directory record (made-by 0x031E, needed 45) and locator, always.
//   end of central directory record, counts and offsets saturated, no comment.

#include <cstddef>
#include <cstdint>
#include <string>

namespace dcpp::detail::zip {

constexpr uint32_t kLocalHeaderSig = 0x04034b50;
constexpr uint32_t kCentralHeaderSig = 0x02014b50;
constexpr uint32_t kDataDescriptorSig = 0x08074b50;
constexpr uint32_t kZip64EndSig = 0x06064b50;
constexpr uint32_t kZip64LocatorSig = 0x07064b50;
constexpr uint32_t kEndSig = 0x06054b50;

constexpr std::size_t kLocalHeaderSize = 30;
constexpr std::size_t kCentralHeaderSize = 46;
constexpr std::size_t kZip64EndSize = 56;
constexpr std::size_t kZip64LocatorSize = 20;
constexpr std::size_t kEndSize = 22;

// The fields of each record, by their offset from its signature (APPNOTE.TXT 4.3.7, 4.3.12,
// 4.3.14 to 4.3.16), for the reader and the layout check alike.
namespace local_header {
constexpr std::size_t kVersionNeeded = 4, kFlags = 6, kMethod = 8, kTime = 10, kDate = 12,
                      kCrc32 = 14, kCompressedSize = 18, kUncompressedSize = 22, kNameSize = 26,
                      kExtraSize = 28;
}  // namespace local_header
namespace central_header {
constexpr std::size_t kVersionMadeBy = 4, kVersionNeeded = 6, kFlags = 8, kMethod = 10, kTime = 12,
                      kDate = 14, kCrc32 = 16, kCompressedSize = 20, kUncompressedSize = 24,
                      kNameSize = 28, kExtraSize = 30, kCommentSize = 32, kDiskStart = 34,
                      kInternalAttributes = 36, kExternalAttributes = 38, kLocalHeaderOffset = 42;
}  // namespace central_header
namespace end_record {
constexpr std::size_t kDisk = 4, kDirectoryDisk = 6, kDiskRecords = 8, kRecords = 10,
                      kDirectorySize = 12, kDirectoryOffset = 16, kCommentSize = 20;
}  // namespace end_record
namespace zip64_locator {
constexpr std::size_t kEndDisk = 4, kEndOffset = 8, kDisks = 16;
}  // namespace zip64_locator
namespace zip64_end {
constexpr std::size_t kRecordSize = 4, kVersionMadeBy = 12, kVersionNeeded = 14, kDisk = 16,
                      kDirectoryDisk = 20, kDiskRecords = 24, kRecords = 32, kDirectorySize = 40,
                      kDirectoryOffset = 48;
}  // namespace zip64_end

constexpr uint16_t kFlagDataDescriptor = 0x0008;
constexpr uint16_t kFlagUtf8 = 0x0800;
constexpr uint16_t kFlagEncrypted = 0x0001 | 0x0040;
constexpr uint16_t kZip64ExtraId = 0x0001;
constexpr uint64_t kMax32 = 0xFFFFFFFF;
constexpr uint64_t kMax16 = 0xFFFF;
constexpr uint64_t kAlignment = 64;

inline void put16(std::string& out, uint64_t v) {
  const char b[2] = {static_cast<char>(v), static_cast<char>(v >> 8)};
  out.append(b, 2);
}

inline void put32(std::string& out, uint64_t v) {
  put16(out, v & 0xFFFF);
  put16(out, (v >> 16) & 0xFFFF);
}

inline void put64(std::string& out, uint64_t v) {
  put32(out, v & kMax32);
  put32(out, v >> 32);
}

inline uint16_t get16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }

inline uint32_t get32(const uint8_t* p) {
  return static_cast<uint32_t>(get16(p)) | (static_cast<uint32_t>(get16(p + 2)) << 16);
}

inline uint64_t get64(const uint8_t* p) {
  return static_cast<uint64_t>(get32(p)) | (static_cast<uint64_t>(get32(p + 4)) << 32);
}

// The zip64 extra field miniz writes: id 1, then each given value as 8 bytes. Empty when none.
inline std::string zip64_extra(const uint64_t* first, const uint64_t* second,
                               const uint64_t* third) {
  std::string out;
  const uint64_t* values[] = {first, second, third};
  std::size_t count = 0;
  for (const uint64_t* v : values) {
    count += v != nullptr;
  }
  if (count == 0) {
    return out;
  }
  put16(out, kZip64ExtraId);
  put16(out, 8 * count);
  for (const uint64_t* v : values) {
    if (v != nullptr) {
      put64(out, *v);
    }
  }
  return out;
}

inline uint16_t record_flags(uint64_t size) {
  return size != 0 ? kFlagUtf8 | kFlagDataDescriptor : kFlagUtf8;
}

}  // namespace dcpp::detail::zip
