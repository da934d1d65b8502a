// Walks each item's zip archive from its first local header to its end record, as PyTorch's
// writer lays it out ("format/zip/zip_format.h"), taking payload sizes from the central directory.

#include "byte_regions.h"

#include "format/byte_io.h"
#include "format/zip/zip_blob_reader.h"
#include "format/zip/zip_format.h"

#include <algorithm>
#include <stdexcept>

namespace dcpp::corruption {

namespace {

using namespace detail::zip;

constexpr uint16_t kPaddingExtraId = 0x4246;  // "FB"

class SpanList {
 public:
  explicit SpanList(std::vector<Span>& spans) : spans_(spans) {}
  void add(uint64_t begin, uint64_t end, Region region, const std::string& key) {
    if (end <= begin) return;
    if (!spans_.empty() && spans_.back().end == begin && spans_.back().region == region &&
        spans_.back().key == key) {
      spans_.back().end = end;
    } else {
      spans_.push_back(Span{begin, end, region, key});
    }
  }

 private:
  std::vector<Span>& spans_;
};

void map_item(const std::string& file, const ItemPlace& item, SpanList& out) {
  const std::string_view bytes(file.data() + item.offset, item.length);
  const detail::MemorySource source(bytes, "item '" + item.key + "'");
  const detail::ZipBlobReader zip(source);
  const auto* p = reinterpret_cast<const uint8_t*>(bytes.data());
  const uint64_t base = item.offset;
  uint64_t at = 0;
  const auto fail = [&](const std::string& what) {
    throw std::runtime_error("cannot map item '" + item.key + "': " + what);
  };
  while (at + 4 <= item.length && get32(p + at) == kLocalHeaderSig) {
    const uint64_t name_size = get16(p + at + 26);
    const uint64_t extra_size = get16(p + at + 28);
    const std::string name(bytes.substr(at + kLocalHeaderSize, name_size));
    const std::string relative = name.substr(name.find('/') + 1);
    const detail::ZipRecordInfo* record = zip.find(relative);
    if (record == nullptr) fail("no record " + name);
    const uint64_t extra = at + kLocalHeaderSize + name_size;
    out.add(base + at, base + extra, Region::kLocalHeader, item.key);
    bool zip64 = false;
    for (uint64_t e = extra; e + 4 <= extra + extra_size;) {
      const uint16_t id = get16(p + e);
      const uint64_t n = get16(p + e + 2);
      zip64 = zip64 || id == kZip64ExtraId;
      out.add(base + e, base + e + 4, Region::kLocalHeader, item.key);
      out.add(base + e + 4, base + e + 4 + n,
              id == kPaddingExtraId ? Region::kPadding : Region::kLocalHeader, item.key);
      e += 4 + n;
    }
    const uint64_t payload = extra + extra_size;
    if (payload != record->data_offset) fail("payload of " + name + " is not where expected");
    const bool tensor = relative.rfind("data/", 0) == 0;
    out.add(base + payload, base + payload + record->size,
            tensor ? Region::kTensorPayload : Region::kRecordPayload, item.key);
    at = payload + record->size;
    if (record->size != 0) {
      const uint64_t descriptor = zip64 ? 24 : 16;
      out.add(base + at, base + at + descriptor, Region::kDataDescriptor, item.key);
      at += descriptor;
    }
  }
  if (at + 4 > item.length || get32(p + at) != kCentralHeaderSig) fail("no central directory");
  const std::size_t zip64_end = bytes.rfind(std::string_view("PK\x06\x06", 4));
  if (zip64_end == std::string_view::npos || zip64_end < at) fail("no zip64 end record");
  out.add(base + at, base + zip64_end, Region::kCentralDirectory, item.key);
  out.add(base + zip64_end, base + item.length, Region::kEndRecords, item.key);
}

}  // namespace

const char* region_name(Region region) {
  switch (region) {
    case Region::kLocalHeader:
      return "zip local header";
    case Region::kPadding:
      return "padding";
    case Region::kTensorPayload:
      return "payload (tensor data)";
    case Region::kRecordPayload:
      return "payload (other records)";
    case Region::kDataDescriptor:
      return "data descriptor";
    case Region::kCentralDirectory:
      return "central directory";
    case Region::kEndRecords:
      return "end records";
    case Region::kOutsideItems:
      return "outside items";
    case Region::kMetadata:
      return ".metadata";
    case Region::kChecksumFile:
      return "checksum file";
  }
  return "?";
}

std::vector<Span> map_data_file(const std::string& bytes, std::vector<ItemPlace> items) {
  std::sort(items.begin(), items.end(),
            [](const ItemPlace& a, const ItemPlace& b) { return a.offset < b.offset; });
  std::vector<Span> spans;
  SpanList out(spans);
  uint64_t end = 0;
  for (const ItemPlace& item : items) {
    if (item.offset < end || item.offset + item.length > bytes.size()) {
      throw std::runtime_error("item '" + item.key + "' overlaps another or the end of its file");
    }
    out.add(end, item.offset, Region::kOutsideItems, "");
    map_item(bytes, item, out);
    end = item.offset + item.length;
  }
  out.add(end, bytes.size(), Region::kOutsideItems, "");
  return spans;
}

const Span& span_at(const std::vector<Span>& spans, uint64_t offset) {
  const auto it = std::upper_bound(spans.begin(), spans.end(), offset,
                                   [](uint64_t o, const Span& s) { return o < s.end; });
  if (it == spans.end() || offset < it->begin) {
    throw std::runtime_error("offset " + std::to_string(offset) + " lies in no span");
  }
  return *it;
}

}  // namespace dcpp::corruption
