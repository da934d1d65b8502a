// Reads the zip layout described in zip_format.h, and any stored-only zip under one root folder,
// checking every length against the source before it reads or allocates. While parsing it reads
// the last 64 KiB (the whole archive when smaller), then the central directory and one local header
// per record only when they lie before that, and never a payload.

#include "format/zip/zip_blob_reader.h"

#include "format/crc32.h"
#include "format/zip/zip_format.h"

#include <dcpp/core/checkpoint_error.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <limits>
#include <thread>

namespace dcpp::detail {
namespace {

using namespace zip;

// Reads go in blocks small enough that the CRC finds each block still in the core's cache.
constexpr std::size_t kReadBlockSize = std::size_t{512} << 10;

// Payloads from this size on are read by two threads, each taking one half.
constexpr uint64_t kParallelReadThreshold = uint64_t{8} << 20;

// The largest central directory the reader loads (about 3.5 million records).
constexpr uint64_t kMaxCentralDirectory = uint64_t{256} << 20;

[[noreturn]] void throw_malformed(const ByteSource& source, const std::string& what) {
  throw CheckpointError(ErrorKind::kCorrupt,
                        source.describe() + ": not a valid torch.save zip archive (" + what +
                            "); the data is corrupted or was not written by torch.save");
}

// The last bytes of the source, read once: the end records lie there, and so does all of a small
// archive, which is then read from the source once.
class Tail {
 public:
  Tail(const ByteSource& source, uint64_t size)
      : source_(source),
        size_(size),
        offset_(size - std::min<uint64_t>(size, kEndSize + kMax16 + kZip64LocatorSize)),
        bytes_(static_cast<std::size_t>(size - offset_)) {
    source_.read(offset_, bytes_.data(), bytes_.size());
  }
  const std::vector<uint8_t>& bytes() const { return bytes_; }
  uint64_t offset() const { return offset_; }
  void read_at(uint64_t offset, void* dst, std::size_t n) const {
    if (offset >= offset_ && offset <= size_ && n <= size_ - offset) {
      std::memcpy(dst, bytes_.data() + (offset - offset_), n);
    } else {
      source_.read(offset, dst, n);
    }
  }

 private:
  const ByteSource& source_;
  uint64_t size_;
  uint64_t offset_;
  std::vector<uint8_t> bytes_;
};

// What the end records say of the central directory.
struct DirectoryBounds {
  uint64_t count = 0;
  uint64_t size = 0;
  uint64_t offset = 0;
  uint64_t limit = 0;  // the directory ends before this: the first end record
};

// The end record: the last PK\5\6 whose comment runs exactly to the end of the source.
DirectoryBounds read_end_record(const ByteSource& source, const Tail& tail, ZipLayout& layout,
                                std::size_t& end_at) {
  const std::vector<uint8_t>& bytes = tail.bytes();
  for (end_at = bytes.size() - kEndSize;; --end_at) {
    const uint8_t* p = bytes.data() + end_at;
    if (get32(p) == kEndSig &&
        end_at + kEndSize + get16(p + end_record::kCommentSize) == bytes.size()) {
      break;
    }
    if (end_at == 0) {
      throw_malformed(source, "no end of central directory record");
    }
  }
  const uint8_t* end = bytes.data() + end_at;
  if (get16(end + end_record::kDisk) != 0 || get16(end + end_record::kDirectoryDisk) != 0 ||
      get16(end + end_record::kDiskRecords) != get16(end + end_record::kRecords)) {
    throw_malformed(source, "multi-disk archive");
  }
  layout.end_offset = tail.offset() + end_at;
  DirectoryBounds bounds;
  bounds.count = get16(end + end_record::kRecords);
  bounds.size = get32(end + end_record::kDirectorySize);
  bounds.offset = get32(end + end_record::kDirectoryOffset);
  bounds.limit = layout.end_offset;
  return bounds;
}

// The zip64 records, when their locator sits right before the end record at `end_at` of the
// tail: their wide values replace the end record's saturated ones.
void read_zip64_end(const ByteSource& source, const Tail& tail, std::size_t end_at,
                    ZipLayout& layout, DirectoryBounds& bounds) {
  const uint8_t* end = tail.bytes().data() + end_at;
  if (end_at < kZip64LocatorSize || get32(end - kZip64LocatorSize) != kZip64LocatorSig) {
    return;
  }
  const uint8_t* locator = end - kZip64LocatorSize;
  const uint64_t locator_offset = layout.end_offset - kZip64LocatorSize;
  const uint64_t zip64_offset = get64(locator + zip64_locator::kEndOffset);
  if (get32(locator + zip64_locator::kEndDisk) != 0 || get32(locator + zip64_locator::kDisks) > 1) {
    throw_malformed(source, "multi-disk zip64 archive");
  }
  if (zip64_offset > locator_offset || locator_offset - zip64_offset < kZip64EndSize) {
    throw_malformed(source, "zip64 end of central directory record out of bounds");
  }
  uint8_t z[kZip64EndSize];
  tail.read_at(zip64_offset, z, sizeof(z));
  const uint64_t record_size = get64(z + zip64_end::kRecordSize);
  if (get32(z) != kZip64EndSig || record_size < kZip64EndSize - 12 ||
      record_size > locator_offset - zip64_offset - 12) {
    throw_malformed(source, "bad zip64 end of central directory record");
  }
  if (get32(z + zip64_end::kDisk) != 0 || get32(z + zip64_end::kDirectoryDisk) != 0 ||
      get64(z + zip64_end::kDiskRecords) != get64(z + zip64_end::kRecords)) {
    throw_malformed(source, "multi-disk zip64 archive");
  }
  const uint64_t count = get64(z + zip64_end::kRecords);
  const uint64_t size = get64(z + zip64_end::kDirectorySize);
  const uint64_t offset = get64(z + zip64_end::kDirectoryOffset);
  const auto agrees = [](uint64_t classic, uint64_t wide, uint64_t max) {
    return classic == wide || classic == max;
  };
  if (!agrees(bounds.count, count, kMax16) || !agrees(bounds.size, size, kMax32) ||
      !agrees(bounds.offset, offset, kMax32)) {
    throw_malformed(source, "end of central directory records disagree");
  }
  bounds = DirectoryBounds{count, size, offset, zip64_offset};
  layout.has_zip64_end = true;
  layout.zip64_end_offset = zip64_offset;
}

void check_directory_bounds(const ByteSource& source, const DirectoryBounds& bounds) {
  if (bounds.offset > bounds.limit || bounds.size > bounds.limit - bounds.offset) {
    throw_malformed(source, "central directory out of bounds");
  }
  if (bounds.count == 0) {
    throw_malformed(source, "no records");
  }
  if (bounds.size > kMaxCentralDirectory) {
    throw_malformed(source, "central directory of " + std::to_string(bounds.size) +
                                " bytes is larger than supported");
  }
  if (bounds.count > bounds.size / kCentralHeaderSize) {
    throw_malformed(source, std::to_string(bounds.count) +
                                " records cannot fit a central directory of " +
                                std::to_string(bounds.size) + " bytes");
  }
}

// The sizes, offset and disk of a central directory entry, with the fields saturated in the
// entry read from its zip64 extra field, in the order APPNOTE gives. `bad` throws.
template <typename Bad>
void read_zip64_extra(const uint8_t* extra, std::size_t extra_size, uint64_t& uncompressed,
                      uint64_t& compressed, uint64_t& header_offset, uint64_t& disk,
                      const Bad& bad) {
  if (uncompressed != kMax32 && compressed != kMax32 && header_offset != kMax32 && disk != kMax16) {
    return;
  }
  const uint8_t* field = nullptr;
  std::size_t field_size = 0;
  for (std::size_t e = 0; extra_size - e >= 4;) {
    const std::size_t n = get16(extra + e + 2);
    if (extra_size - e - 4 < n) {
      bad("extra field out of bounds");
    }
    if (get16(extra + e) == kZip64ExtraId) {
      field = extra + e + 4;
      field_size = n;
      break;
    }
    e += 4 + n;
  }
  std::size_t used = 0;
  const auto take = [&](uint64_t& value, uint64_t max, std::size_t width) {
    if (value != max) {
      return;
    }
    if (field == nullptr || field_size - used < width) {
      bad("zip64 extra field missing or short");
    }
    value = width == 8 ? get64(field + used) : get32(field + used);
    used += width;
  };
  take(uncompressed, kMax32, 8);
  take(compressed, kMax32, 8);
  take(header_offset, kMax32, 8);
  take(disk, kMax16, 4);
}

// The central directory entry `i` at `at` of `directory` (`at` then past it) and its local
// header: the record, checked. The first record's root folder is stored in `root`, which the
// others must share; `local` is scratch for the local header.
ZipRecordInfo read_record(const ByteSource& source, const Tail& tail,
                          const std::vector<uint8_t>& directory, std::size_t& at, uint64_t i,
                          uint64_t directory_offset, std::string& root,
                          std::vector<uint8_t>& local) {
  namespace c = central_header;
  if (directory.size() - at < kCentralHeaderSize) {
    throw_malformed(source, "central directory truncated");
  }
  const uint8_t* h = directory.data() + at;
  const std::size_t name_size = get16(h + c::kNameSize);
  const std::size_t extra_size = get16(h + c::kExtraSize);
  const std::size_t comment_size = get16(h + c::kCommentSize);
  if (get32(h) != kCentralHeaderSig ||
      directory.size() - at - kCentralHeaderSize < name_size + extra_size + comment_size) {
    throw_malformed(source, "bad central directory entry " + std::to_string(i));
  }
  const std::string name(reinterpret_cast<const char*>(h + kCentralHeaderSize), name_size);
  const uint8_t* extra = h + kCentralHeaderSize + name_size;
  at += kCentralHeaderSize + name_size + extra_size + comment_size;

  const auto bad = [&](const std::string& what) {
    throw_malformed(source, "record '" + name + "': " + what);
  };
  if ((get16(h + c::kFlags) & kFlagEncrypted) != 0) {
    bad("encrypted");
  }
  if (get16(h + c::kMethod) != 0) {
    bad("compressed with method " + std::to_string(get16(h + c::kMethod)) +
        ", only stored records are supported");
  }
  uint64_t compressed = get32(h + c::kCompressedSize);
  uint64_t uncompressed = get32(h + c::kUncompressedSize);
  uint64_t header_offset = get32(h + c::kLocalHeaderOffset);
  uint64_t disk = get16(h + c::kDiskStart);
  read_zip64_extra(extra, extra_size, uncompressed, compressed, header_offset, disk, bad);
  if (disk != 0) {
    bad("on another disk");
  }
  if (compressed != uncompressed) {
    bad("stored size differs from its compressed size");
  }

  // The name must be "<root>/<relative>", with the root of the first record.
  const std::size_t slash = name.find('/');
  if (slash == std::string::npos || slash == 0 || slash + 1 == name.size()) {
    bad("not a file under a root folder");
  }
  if (i == 0) {
    root = name.substr(0, slash);
  } else if (slash != root.size() || name.compare(0, slash, root) != 0) {
    bad("not under the root folder '" + root + "'");
  }

  // The local header: its name must agree; the payload follows its extra field.
  if (header_offset > directory_offset ||
      directory_offset - header_offset < kLocalHeaderSize + name_size) {
    bad("local header out of bounds");
  }
  local.resize(kLocalHeaderSize + name_size);
  tail.read_at(header_offset, local.data(), local.size());
  if (get32(local.data()) != kLocalHeaderSig || get16(local.data() + local_header::kMethod) != 0 ||
      get16(local.data() + local_header::kNameSize) != name_size ||
      std::memcmp(local.data() + kLocalHeaderSize, name.data(), name_size) != 0) {
    bad("local header does not match the central directory");
  }
  const uint64_t data_offset =
      header_offset + kLocalHeaderSize + name_size + get16(local.data() + local_header::kExtraSize);
  if (data_offset > directory_offset || uncompressed > directory_offset - data_offset) {
    bad("payload out of bounds");
  }
  return ZipRecordInfo{name.substr(slash + 1), data_offset, uncompressed, get32(h + c::kCrc32),
                       header_offset};
}

}  // namespace

ZipBlobReader::ZipBlobReader(const ByteSource& source) : source_(source) {
  const uint64_t size = source_.size();
  if (size < kEndSize) {
    throw_malformed(source_, "only " + std::to_string(size) + " bytes");
  }
  const Tail tail(source_, size);
  std::size_t end_at = 0;
  DirectoryBounds bounds = read_end_record(source_, tail, layout_, end_at);
  read_zip64_end(source_, tail, end_at, layout_, bounds);
  layout_.directory_offset = bounds.offset;
  layout_.directory_size = bounds.size;
  check_directory_bounds(source_, bounds);

  std::vector<uint8_t> directory(static_cast<std::size_t>(bounds.size));
  tail.read_at(bounds.offset, directory.data(), directory.size());
  records_.reserve(static_cast<std::size_t>(bounds.count));
  std::vector<uint8_t> local;
  std::size_t at = 0;
  for (uint64_t i = 0; i < bounds.count; ++i) {
    records_.push_back(read_record(source_, tail, directory, at, i, bounds.offset, root_, local));
  }
  if (at != directory.size()) {
    throw_malformed(source_, "central directory size disagrees with its entries");
  }
  index_by_name();
}

void ZipBlobReader::index_by_name() {
  by_name_.resize(records_.size());
  for (std::size_t i = 0; i < by_name_.size(); ++i) {
    by_name_[i] = i;
  }
  std::sort(by_name_.begin(), by_name_.end(),
            [&](std::size_t a, std::size_t b) { return records_[a].name < records_[b].name; });
  for (std::size_t i = 1; i < by_name_.size(); ++i) {
    if (records_[by_name_[i - 1]].name == records_[by_name_[i]].name) {
      throw_malformed(source_, "record '" + records_[by_name_[i]].name + "' appears twice");
    }
  }
}

const ZipRecordInfo* ZipBlobReader::find(std::string_view name) const {
  const auto it = std::lower_bound(
      by_name_.begin(), by_name_.end(), name,
      [&](std::size_t index, std::string_view key) { return records_[index].name < key; });
  if (it == by_name_.end() || records_[*it].name != name) {
    return nullptr;
  }
  return &records_[*it];
}

const ZipRecordInfo& ZipBlobReader::get(std::string_view name) const {
  const ZipRecordInfo* record = find(name);
  if (record == nullptr) {
    throw CheckpointError(ErrorKind::kCorrupt,
                          source_.describe() + ": the zip archive has no record '" +
                              std::string(name) +
                              "'; the data is corrupted or not a torch.save file");
  }
  return *record;
}

void ZipBlobReader::check_range(const ZipRecordInfo& record, uint64_t offset, uint64_t n) const {
  const uint64_t size = source_.size();
  if (record.data_offset > size || record.size > size - record.data_offset ||
      offset > record.size || n > record.size - offset) {
    throw CheckpointError(ErrorKind::kCorrupt,
                          source_.describe() + ": read of " + std::to_string(n) +
                              " bytes at offset " + std::to_string(offset) + " of zip record '" +
                              record.name + "' (" + std::to_string(record.size) +
                              " bytes) is out of bounds");
  }
}

uint32_t ZipBlobReader::read_blocks(uint64_t offset, uint8_t* out, uint64_t size,
                                    bool verify_crc) const {
  uint32_t crc = 0;
  const uint64_t block = std::max<uint64_t>(source_.preferred_read_size(), 1);
  for (uint64_t done = 0; done < size;) {
    const std::size_t n = static_cast<std::size_t>(std::min<uint64_t>(block, size - done));
    source_.read(offset + done, out + done, n);
    if (verify_crc) {
      crc = crc32(crc, out + done, n);
    }
    done += n;
  }
  return crc;
}

namespace {

[[noreturn]] void throw_crc_mismatch(const ByteSource& source, const ZipRecordInfo& record,
                                     uint32_t crc) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "CRC-32 %08x, expected %08x", crc, record.crc32);
  throw CheckpointError(
      ErrorKind::kCorrupt,
      source.describe() + ": zip record '" + record.name + "' has " + buf +
          "; the data is corrupted: restore the file or load an earlier checkpoint");
}

}  // namespace

uint32_t ZipBlobReader::read(const ZipRecordInfo& record, void* dst, bool verify_crc) const {
  check_range(record, 0, record.size);
  if (record.size > std::numeric_limits<std::size_t>::max()) {
    throw CheckpointError(ErrorKind::kCorrupt, source_.describe() + ": zip record '" + record.name +
                                                   "' is too large for this platform");
  }
  auto* out = static_cast<uint8_t*>(dst);
  uint32_t crc = 0;
  if (record.size >= kParallelReadThreshold) {
    // Large payloads: the copy out of the page cache and the CRC dominate, so two threads each
    // read and checksum one half, and the halves' CRCs are combined.
    const uint64_t first = record.size / 2 / kReadBlockSize * kReadBlockSize;
    uint32_t second_crc = 0;
    std::exception_ptr second_error;
    std::thread second([&] {
      try {
        second_crc =
            read_blocks(record.data_offset + first, out + first, record.size - first, verify_crc);
      } catch (...) {
        second_error = std::current_exception();
      }
    });
    uint32_t first_crc = 0;
    try {
      first_crc = read_blocks(record.data_offset, out, first, verify_crc);
    } catch (...) {
      second.join();
      throw;
    }
    second.join();
    if (second_error) {
      std::rethrow_exception(second_error);
    }
    crc = crc32_combine(first_crc, second_crc, record.size - first);
  } else {
    crc = read_blocks(record.data_offset, out, record.size, verify_crc);
  }
  if (verify_crc && crc != record.crc32) {
    throw_crc_mismatch(source_, record, crc);
  }
  return crc;
}

void ZipBlobReader::check_crc(const ZipRecordInfo& record) const {
  check_range(record, 0, record.size);
  std::vector<uint8_t> block(
      static_cast<std::size_t>(std::min<uint64_t>(record.size, kReadBlockSize)));
  uint32_t crc = 0;
  for (uint64_t done = 0; done < record.size;) {
    const std::size_t n =
        static_cast<std::size_t>(std::min<uint64_t>(kReadBlockSize, record.size - done));
    source_.read(record.data_offset + done, block.data(), n);
    crc = crc32(crc, block.data(), n);
    done += n;
  }
  if (crc != record.crc32) {
    throw_crc_mismatch(source_, record, crc);
  }
}

std::string ZipBlobReader::read_string(const ZipRecordInfo& record, bool verify_crc) const {
  check_range(record, 0, record.size);
  std::string out(static_cast<std::size_t>(record.size), '\0');
  read(record, out.data(), verify_crc);
  return out;
}

void ZipBlobReader::read_range(const ZipRecordInfo& record, uint64_t offset, void* dst,
                               std::size_t n) const {
  check_range(record, offset, n);
  source_.read(record.data_offset + offset, dst, n);
}

}  // namespace dcpp::detail
