// Writes the zip layout described in zip_format.h, payloads straight from the caller's memory.

#include "format/zip/zip_blob_writer.h"

#include "background_crc.h"
#include "format/crc32.h"
#include "format/zip/zip_format.h"

#include <dcpp/core/checkpoint_error.h>

#include <algorithm>

namespace dcpp::detail {
namespace {

using namespace zip;

// Writing a payload: each block is checksummed, then handed to the sink, while it is in cache.
constexpr std::size_t kBlockSize = std::size_t{2} << 20;
// Writing with the CRC on another thread: both work on the same block at once, so cache warmth
// matters less than fewer, larger writes.
constexpr std::size_t kBackgroundWriteBlockSize = std::size_t{8} << 20;
// Payloads from this size on are checksummed by a BackgroundCrc, in parallel with their I/O.
constexpr uint64_t kBackgroundCrcThreshold = uint64_t{8} << 20;
// Payloads below this size are checksummed a second time, from the start of the archive, rather
// than folded in with crc32_combine (which costs about as much as checksumming 16 KiB).
constexpr uint64_t kFoldThreshold = uint64_t{16} << 10;

}  // namespace

ZipBlobWriter::ZipBlobWriter(ByteSink& sink, std::string archive_name)
    : sink_(sink), archive_name_(std::move(archive_name)) {
  if (archive_name_.empty() || archive_name_.find('/') != std::string::npos) {
    throw CheckpointError(ErrorKind::kUsage,
                          "zip archive root name '" + archive_name_ +
                              "' is invalid: it must be non-empty and contain no '/'");
  }
}

void ZipBlobWriter::emit(const void* data, std::size_t size) {
  sink_.write(data, size);
  offset_ += size;
  archive_crc_ = crc32(archive_crc_, data, size);
}

void ZipBlobWriter::emit_payload(const void* data, std::size_t size) {
  sink_.write(data, size);
  offset_ += size;
}

void ZipBlobWriter::fold_payload(uint32_t crc, uint64_t size) {
  archive_crc_ = crc32_combine(archive_crc_, crc, size);
}

uint32_t ZipBlobWriter::add(std::string_view name, const void* data, uint64_t size) {
  const std::string full_name = archive_name_ + "/" + std::string(name);
  if (finished_ || failed_) {
    throw CheckpointError(ErrorKind::kUsage,
                          "cannot add record '" + full_name + "' to a zip archive that is " +
                              (finished_ ? "finished" : "broken by an earlier write error"));
  }
  if (name.empty() || full_name.size() > kMax16) {
    throw CheckpointError(ErrorKind::kUsage, "zip record name '" + full_name +
                                                 "' is empty or longer than 65535 bytes");
  }
  if (size != 0 && data == nullptr) {
    throw CheckpointError(ErrorKind::kUsage, "zip record '" + full_name + "' has no data for its " +
                                                 std::to_string(size) + " bytes");
  }
  if (size > std::numeric_limits<std::size_t>::max()) {
    throw CheckpointError(ErrorKind::kUsage,
                          "zip record '" + full_name + "' is too large for this platform");
  }
  if (entries_.size() >= kMax32) {
    throw CheckpointError(ErrorKind::kUsage,
                          "too many records in zip archive '" + archive_name_ + "'");
  }
  if (!names_.insert(std::string(name)).second) {
    throw CheckpointError(ErrorKind::kUsage, "zip record '" + full_name + "' is written twice");
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
      emit_payload(bytes + done, n);
      done += n;
    }
    crc = background.finish();
  } else {
    for (uint64_t done = 0; done < size;) {
      const std::size_t n = static_cast<std::size_t>(std::min<uint64_t>(kBlockSize, size - done));
      crc = crc32(crc, bytes + done, n);
      emit_payload(bytes + done, n);
      done += n;
    }
  }

  if (size == 0) {
    // Nothing to fold (and libdeflate's CRC-32 of a null pointer is 0, not a continuation).
  } else if (size < kFoldThreshold) {
    archive_crc_ = crc32(archive_crc_, data, static_cast<std::size_t>(size));  // still in cache
  } else {
    fold_payload(crc, size);
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
  return crc;
}

uint64_t ZipBlobWriter::finish() {
  if (finished_ || failed_) {
    throw CheckpointError(
        ErrorKind::kUsage,
        "cannot finish zip archive '" + archive_name_ + "': it is " +
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
      throw CheckpointError(ErrorKind::kUsage, "the central directory of zip archive '" +
                                                   archive_name_ +
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

}  // namespace dcpp::detail
