// The zip archive of a data item, byte-compatible with PyTorch's PyTorchStreamWriter (miniz).
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
// The reader accepts any stored-only zip under one root folder, checking every length against the
// source before it reads or allocates; while parsing it reads the last 64 KiB (the whole archive
// when smaller), then the central directory and one local header per record only when they lie
// before that, and never a payload.

#include "zip_blob.h"

#include "background_crc.h"

#include <dcpp/core/checkpoint_error.h>

#include <libdeflate.h>
#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <limits>
#include <thread>

namespace dcpp::detail {
namespace {

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

constexpr uint16_t kFlagDataDescriptor = 0x0008;
constexpr uint16_t kFlagUtf8 = 0x0800;
constexpr uint16_t kFlagEncrypted = 0x0001 | 0x0040;
constexpr uint16_t kZip64ExtraId = 0x0001;
constexpr uint64_t kMax32 = 0xFFFFFFFF;
constexpr uint64_t kMax16 = 0xFFFF;
constexpr uint64_t kAlignment = 64;

// Writing a payload: each block is checksummed, then handed to the sink, while it is in cache.
constexpr std::size_t kBlockSize = std::size_t{2} << 20;
// Writing with the CRC on another thread: both work on the same block at once, so cache warmth
// matters less than fewer, larger writes.
constexpr std::size_t kBackgroundWriteBlockSize = std::size_t{8} << 20;
// Reads go in blocks small enough that the CRC finds each block still in the core's cache.
constexpr std::size_t kReadBlockSize = std::size_t{256} << 10;

// Payloads from this size on are read by two threads, each taking one half.
constexpr uint64_t kParallelReadThreshold = uint64_t{8} << 20;

// Payloads from this size on are checksummed by a BackgroundCrc, in parallel with their I/O.
constexpr uint64_t kBackgroundCrcThreshold = uint64_t{8} << 20;

// The largest central directory the reader loads (about 3.5 million records).
constexpr uint64_t kMaxCentralDirectory = uint64_t{256} << 20;

void put16(std::string& out, uint64_t v) {
  const char b[2] = {static_cast<char>(v), static_cast<char>(v >> 8)};
  out.append(b, 2);
}

void put32(std::string& out, uint64_t v) {
  put16(out, v & 0xFFFF);
  put16(out, (v >> 16) & 0xFFFF);
}

void put64(std::string& out, uint64_t v) {
  put32(out, v & kMax32);
  put32(out, v >> 32);
}

uint16_t get16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }

uint32_t get32(const uint8_t* p) {
  return static_cast<uint32_t>(get16(p)) | (static_cast<uint32_t>(get16(p + 2)) << 16);
}

uint64_t get64(const uint8_t* p) {
  return static_cast<uint64_t>(get32(p)) | (static_cast<uint64_t>(get32(p + 4)) << 32);
}

// The zip64 extra field miniz writes: id 1, then each given value as 8 bytes. Empty when none.
std::string zip64_extra(const uint64_t* first, const uint64_t* second, const uint64_t* third) {
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

uint16_t record_flags(uint64_t size) {
  return size != 0 ? kFlagUtf8 | kFlagDataDescriptor : kFlagUtf8;
}

[[noreturn]] void throw_malformed(const ByteSource& source, const std::string& what) {
  throw CheckpointError(source.describe() + ": not a valid torch.save zip archive (" + what +
                        "); the data is corrupted or was not written by torch.save");
}

}  // namespace

uint32_t crc32(uint32_t crc, const void* data, std::size_t n) {
  return libdeflate_crc32(crc, data, n);
}

uint32_t crc32_combine(uint32_t crc_a, uint32_t crc_b, uint64_t length_b) {
  return static_cast<uint32_t>(::crc32_combine(crc_a, crc_b, static_cast<z_off_t>(length_b)));
}

// ---------------------------------------------------------------------------------------------
// Writer

ZipBlobWriter::ZipBlobWriter(ByteSink& sink, std::string archive_name)
    : sink_(sink), archive_name_(std::move(archive_name)) {
  if (archive_name_.empty() || archive_name_.find('/') != std::string::npos) {
    throw CheckpointError("zip archive root name '" + archive_name_ +
                          "' is invalid: it must be non-empty and contain no '/'");
  }
}

void ZipBlobWriter::emit(const void* data, std::size_t size) {
  sink_.write(data, size);
  offset_ += size;
}

void ZipBlobWriter::add(std::string_view name, const void* data, uint64_t size) {
  const std::string full_name = archive_name_ + "/" + std::string(name);
  if (finished_ || failed_) {
    throw CheckpointError("cannot add record '" + full_name + "' to a zip archive that is " +
                          (finished_ ? "finished" : "broken by an earlier write error"));
  }
  if (name.empty() || full_name.size() > kMax16) {
    throw CheckpointError("zip record name '" + full_name +
                          "' is empty or longer than 65535 bytes");
  }
  if (size != 0 && data == nullptr) {
    throw CheckpointError("zip record '" + full_name + "' has no data for its " +
                          std::to_string(size) + " bytes");
  }
  if (size > std::numeric_limits<std::size_t>::max()) {
    throw CheckpointError("zip record '" + full_name + "' is too large for this platform");
  }
  if (entries_.size() >= kMax32) {
    throw CheckpointError("too many records in zip archive '" + archive_name_ + "'");
  }
  if (!names_.insert(std::string(name)).second) {
    throw CheckpointError("zip record '" + full_name + "' is written twice");
  }

  failed_ = true;  // until this record is complete: a sink error leaves the archive unusable
  const uint64_t header_offset = offset_;
  const bool big = size >= kMax32;
  const bool far = header_offset >= kMax32;
  const uint64_t zero = 0;
  const std::string z64 =
      zip64_extra(big ? &size : nullptr, big ? &zero : nullptr, far ? &header_offset : nullptr);

  // PyTorch's getPadding: the FB field pads the payload to the next multiple of 64.
  const uint64_t unpadded = header_offset + kLocalHeaderSize + full_name.size() + z64.size() + 4;
  const uint64_t padding = (kAlignment - unpadded % kAlignment) % kAlignment;

  std::string header;
  header.reserve(kLocalHeaderSize + full_name.size() + z64.size() + 4 + padding);
  put32(header, kLocalHeaderSig);
  put16(header, 0);  // version needed
  put16(header, record_flags(size));
  put16(header, 0);  // method: stored
  put16(header, 0);  // time
  put16(header, 0);  // date
  put32(header, 0);  // CRC-32, in the data descriptor
  put32(header, 0);  // compressed size, ditto
  put32(header, 0);  // uncompressed size, ditto
  put16(header, full_name.size());
  put16(header, z64.size() + 4 + padding);
  header += full_name;
  header += z64;
  header += "FB";
  put16(header, padding);
  header.append(padding, 'Z');
  emit(header.data(), header.size());

  uint32_t crc = 0;
  const auto* bytes = static_cast<const uint8_t*>(data);
  if (size >= kBackgroundCrcThreshold) {
    // Large payloads: checksum each block on a helper thread while this one writes it.
    BackgroundCrc background;
    for (uint64_t done = 0; done < size;) {
      const std::size_t n =
          static_cast<std::size_t>(std::min<uint64_t>(kBackgroundWriteBlockSize, size - done));
      background.add(bytes + done, n);
      emit(bytes + done, n);
      done += n;
    }
    crc = background.finish();
  } else {
    for (uint64_t done = 0; done < size;) {
      const std::size_t n = static_cast<std::size_t>(std::min<uint64_t>(kBlockSize, size - done));
      crc = crc32(crc, bytes + done, n);
      emit(bytes + done, n);
      done += n;
    }
  }

  if (size != 0) {
    std::string descriptor;
    put32(descriptor, kDataDescriptorSig);
    put32(descriptor, crc);
    if (z64.empty()) {
      put32(descriptor, size);
      put32(descriptor, size);
    } else {
      put64(descriptor, size);
      put64(descriptor, size);
    }
    emit(descriptor.data(), descriptor.size());
  }
  entries_.push_back(Entry{full_name, header_offset, size, crc});
  failed_ = false;
}

uint64_t ZipBlobWriter::finish() {
  if (finished_ || failed_) {
    throw CheckpointError("cannot finish zip archive '" + archive_name_ + "': it is " +
                          (finished_ ? "already finished" : "broken by an earlier write error"));
  }
  finished_ = true;
  failed_ = true;

  std::string directory;
  for (const Entry& e : entries_) {
    const bool big = e.size >= kMax32;
    const bool far = e.header_offset >= kMax32;
    const std::string z64 = zip64_extra(big ? &e.size : nullptr, big ? &e.size : nullptr,
                                        far ? &e.header_offset : nullptr);
    put32(directory, kCentralHeaderSig);
    put16(directory, 0);  // version made by
    put16(directory, 0);  // version needed
    put16(directory, record_flags(e.size));
    put16(directory, 0);  // method: stored
    put16(directory, 0);  // time
    put16(directory, 0);  // date
    put32(directory, e.crc32);
    put32(directory, std::min(e.size, kMax32));
    put32(directory, std::min(e.size, kMax32));
    put16(directory, e.name.size());
    put16(directory, z64.size());
    put16(directory, 0);  // comment length
    put16(directory, 0);  // disk number
    put16(directory, 0);  // internal attributes
    put32(directory, 0);  // external attributes
    put32(directory, std::min(e.header_offset, kMax32));
    directory += e.name;
    directory += z64;
    if (directory.size() >= kMax32) {
      throw CheckpointError("the central directory of zip archive '" + archive_name_ +
                            "' reaches 4 GiB; write fewer records");
    }
  }

  const uint64_t count = entries_.size();
  const uint64_t directory_offset = count == 0 ? 0 : offset_;  // as miniz
  emit(directory.data(), directory.size());

  const uint64_t zip64_end_offset = offset_;
  std::string tail;
  put32(tail, kZip64EndSig);
  put64(tail, kZip64EndSize - 12);
  put16(tail, 0x031E);  // made by: Unix, 3.0
  put16(tail, 0x002D);  // needed: 4.5 (zip64)
  put32(tail, 0);       // this disk
  put32(tail, 0);       // disk of the central directory
  put64(tail, count);
  put64(tail, count);
  put64(tail, directory.size());
  put64(tail, directory_offset);
  put32(tail, kZip64LocatorSig);
  put32(tail, 0);  // disk of the zip64 end record
  put64(tail, zip64_end_offset);
  put32(tail, 1);  // number of disks
  put32(tail, kEndSig);
  put16(tail, 0);
  put16(tail, 0);
  put16(tail, std::min(count, kMax16));
  put16(tail, std::min(count, kMax16));
  put32(tail, std::min<uint64_t>(directory.size(), kMax32));
  put32(tail, std::min(directory_offset, kMax32));
  put16(tail, 0);  // comment length
  emit(tail.data(), tail.size());
  failed_ = false;
  return offset_;
}

// ---------------------------------------------------------------------------------------------
// Reader

ZipBlobReader::ZipBlobReader(const ByteSource& source) : source_(source) {
  const uint64_t size = source_.size();
  if (size < kEndSize) {
    throw_malformed(source_, "only " + std::to_string(size) + " bytes");
  }

  // The end record: the last PK\5\6 whose comment runs exactly to the end of the source.
  const uint64_t tail_size = std::min<uint64_t>(size, kEndSize + kMax16 + kZip64LocatorSize);
  const uint64_t tail_offset = size - tail_size;
  std::vector<uint8_t> tail(static_cast<std::size_t>(tail_size));
  source_.read(tail_offset, tail.data(), tail.size());
  // Later reads inside the tail come from it: a small archive is read from the source once.
  const auto read_at = [&](uint64_t offset, void* dst, std::size_t n) {
    if (offset >= tail_offset && offset <= size && n <= size - offset) {
      std::memcpy(dst, tail.data() + (offset - tail_offset), n);
    } else {
      source_.read(offset, dst, n);
    }
  };
  std::size_t end_at = tail.size() - kEndSize;
  for (;; --end_at) {
    const uint8_t* p = tail.data() + end_at;
    if (get32(p) == kEndSig && end_at + kEndSize + get16(p + 20) == tail.size()) {
      break;
    }
    if (end_at == 0) {
      throw_malformed(source_, "no end of central directory record");
    }
  }
  const uint8_t* end = tail.data() + end_at;
  const uint64_t end_offset = tail_offset + end_at;
  if (get16(end + 4) != 0 || get16(end + 6) != 0 || get16(end + 8) != get16(end + 10)) {
    throw_malformed(source_, "multi-disk archive");
  }
  uint64_t count = get16(end + 10);
  uint64_t directory_size = get32(end + 12);
  uint64_t directory_offset = get32(end + 16);
  uint64_t directory_limit = end_offset;  // the central directory ends before this

  // The zip64 records, when the locator sits right before the end record.
  if (end_at >= kZip64LocatorSize && get32(end - kZip64LocatorSize) == kZip64LocatorSig) {
    const uint8_t* locator = end - kZip64LocatorSize;
    const uint64_t locator_offset = end_offset - kZip64LocatorSize;
    const uint64_t zip64_offset = get64(locator + 8);
    if (get32(locator + 4) != 0 || get32(locator + 16) > 1) {
      throw_malformed(source_, "multi-disk zip64 archive");
    }
    if (zip64_offset > locator_offset || locator_offset - zip64_offset < kZip64EndSize) {
      throw_malformed(source_, "zip64 end of central directory record out of bounds");
    }
    uint8_t z[kZip64EndSize];
    read_at(zip64_offset, z, sizeof(z));
    const uint64_t record_size = get64(z + 4);
    if (get32(z) != kZip64EndSig || record_size < kZip64EndSize - 12 ||
        record_size > locator_offset - zip64_offset - 12) {
      throw_malformed(source_, "bad zip64 end of central directory record");
    }
    if (get32(z + 16) != 0 || get32(z + 20) != 0 || get64(z + 24) != get64(z + 32)) {
      throw_malformed(source_, "multi-disk zip64 archive");
    }
    const uint64_t count64 = get64(z + 32);
    const uint64_t size64 = get64(z + 40);
    const uint64_t offset64 = get64(z + 48);
    const auto agrees = [](uint64_t classic, uint64_t wide, uint64_t max) {
      return classic == wide || classic == max;
    };
    if (!agrees(count, count64, kMax16) || !agrees(directory_size, size64, kMax32) ||
        !agrees(directory_offset, offset64, kMax32)) {
      throw_malformed(source_, "end of central directory records disagree");
    }
    count = count64;
    directory_size = size64;
    directory_offset = offset64;
    directory_limit = zip64_offset;
  }

  if (directory_offset > directory_limit || directory_size > directory_limit - directory_offset) {
    throw_malformed(source_, "central directory out of bounds");
  }
  if (count == 0) {
    throw_malformed(source_, "no records");
  }
  if (directory_size > kMaxCentralDirectory) {
    throw_malformed(source_, "central directory of " + std::to_string(directory_size) +
                                 " bytes is larger than supported");
  }
  if (count > directory_size / kCentralHeaderSize) {
    throw_malformed(source_, std::to_string(count) + " records cannot fit a central directory of " +
                                 std::to_string(directory_size) + " bytes");
  }

  std::vector<uint8_t> directory(static_cast<std::size_t>(directory_size));
  read_at(directory_offset, directory.data(), directory.size());
  records_.reserve(static_cast<std::size_t>(count));
  std::vector<uint8_t> local;
  std::size_t at = 0;
  for (uint64_t i = 0; i < count; ++i) {
    if (directory.size() - at < kCentralHeaderSize) {
      throw_malformed(source_, "central directory truncated");
    }
    const uint8_t* h = directory.data() + at;
    const std::size_t name_size = get16(h + 28);
    const std::size_t extra_size = get16(h + 30);
    const std::size_t comment_size = get16(h + 32);
    if (get32(h) != kCentralHeaderSig ||
        directory.size() - at - kCentralHeaderSize < name_size + extra_size + comment_size) {
      throw_malformed(source_, "bad central directory entry " + std::to_string(i));
    }
    const std::string name(reinterpret_cast<const char*>(h + kCentralHeaderSize), name_size);
    const uint8_t* extra = h + kCentralHeaderSize + name_size;
    at += kCentralHeaderSize + name_size + extra_size + comment_size;

    const auto bad = [&](const std::string& what) {
      throw_malformed(source_, "record '" + name + "': " + what);
    };
    if ((get16(h + 8) & kFlagEncrypted) != 0) {
      bad("encrypted");
    }
    if (get16(h + 10) != 0) {
      bad("compressed with method " + std::to_string(get16(h + 10)) +
          ", only stored records are supported");
    }
    uint64_t compressed = get32(h + 20);
    uint64_t uncompressed = get32(h + 24);
    uint64_t header_offset = get32(h + 42);
    uint64_t disk = get16(h + 34);
    if (uncompressed == kMax32 || compressed == kMax32 || header_offset == kMax32 ||
        disk == kMax16) {
      // The zip64 extra field holds, in this order, each field saturated above.
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
      root_ = name.substr(0, slash);
    } else if (slash != root_.size() || name.compare(0, slash, root_) != 0) {
      bad("not under the root folder '" + root_ + "'");
    }

    // The local header: its name must agree; the payload follows its extra field.
    if (header_offset > directory_offset ||
        directory_offset - header_offset < kLocalHeaderSize + name_size) {
      bad("local header out of bounds");
    }
    local.resize(kLocalHeaderSize + name_size);
    read_at(header_offset, local.data(), local.size());
    if (get32(local.data()) != kLocalHeaderSig || get16(local.data() + 8) != 0 ||
        get16(local.data() + 26) != name_size ||
        std::memcmp(local.data() + kLocalHeaderSize, name.data(), name_size) != 0) {
      bad("local header does not match the central directory");
    }
    const uint64_t data_offset =
        header_offset + kLocalHeaderSize + name_size + get16(local.data() + 28);
    if (data_offset > directory_offset || uncompressed > directory_offset - data_offset) {
      bad("payload out of bounds");
    }
    records_.push_back(
        ZipRecordInfo{name.substr(slash + 1), data_offset, uncompressed, get32(h + 16)});
  }
  if (at != directory.size()) {
    throw_malformed(source_, "central directory size disagrees with its entries");
  }

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
    throw CheckpointError(source_.describe() + ": the zip archive has no record '" +
                          std::string(name) + "'; the data is corrupted or not a torch.save file");
  }
  return *record;
}

void ZipBlobReader::check_range(const ZipRecordInfo& record, uint64_t offset, uint64_t n) const {
  const uint64_t size = source_.size();
  if (record.data_offset > size || record.size > size - record.data_offset ||
      offset > record.size || n > record.size - offset) {
    throw CheckpointError(source_.describe() + ": read of " + std::to_string(n) +
                          " bytes at offset " + std::to_string(offset) + " of zip record '" +
                          record.name + "' (" + std::to_string(record.size) +
                          " bytes) is out of bounds");
  }
}

uint32_t ZipBlobReader::read_blocks(uint64_t offset, uint8_t* out, uint64_t size,
                                    bool verify_crc) const {
  uint32_t crc = 0;
  for (uint64_t done = 0; done < size;) {
    const std::size_t n = static_cast<std::size_t>(std::min<uint64_t>(1024 * 1024, size - done));
    source_.read(offset + done, out + done, n);
    if (verify_crc) {
      crc = crc32(crc, out + done, n);
    }
    done += n;
  }
  return crc;
}

void ZipBlobReader::read(const ZipRecordInfo& record, void* dst, bool verify_crc) const {
  check_range(record, 0, record.size);
  if (record.size > std::numeric_limits<std::size_t>::max()) {
    throw CheckpointError(source_.describe() + ": zip record '" + record.name +
                          "' is too large for this platform");
  }
  auto* out = static_cast<uint8_t*>(dst);
  uint32_t crc = 0;
  if (record.size >= kParallelReadThreshold) {
    // Large payloads: the copy out of the page cache and the CRC dominate, so two threads each
    // read and checksum one half, and the halves' CRCs are combined.
    const uint64_t first = record.size / 2 / kBlockSize * kBlockSize;
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
    char buf[64];
    std::snprintf(buf, sizeof(buf), "CRC-32 %08x, expected %08x", crc, record.crc32);
    throw CheckpointError(source_.describe() + ": zip record '" + record.name + "' has " + buf +
                          "; the data is corrupted");
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
