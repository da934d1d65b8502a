#pragma once
// What every byte of a checkpoint's files is: which item (key) it belongs to and which part of the
// item's zip archive, so the harness can say where a damaged byte lay and whom the error must name.

#include <cstdint>
#include <string>
#include <vector>

namespace dcpp::corruption {

enum class Region {
  kLocalHeader,     // a record's local header: fixed fields, name, extra field headers
  kPadding,         // the 'Z' bytes of the "FB" extra field aligning a payload to 64 bytes
  kTensorPayload,   // a tensor storage record's payload ("data/<n>")
  kRecordPayload,   // any other record's payload (data.pkl, byteorder, version, ...)
  kDataDescriptor,  // the CRC-32 and sizes after a payload
  kCentralDirectory,
  kEndRecords,    // zip64 end record, zip64 locator, end of central directory record
  kOutsideItems,  // bytes of a data file no item of .metadata covers (none in dcpp's files)
  kMetadata,      // .metadata
  kChecksumFile,  // dcpp's checksum file
};
constexpr int kRegionCount = 10;

const char* region_name(Region region);

/// A run of bytes [begin, end) of one file.
struct Span {
  uint64_t begin;
  uint64_t end;
  Region region;
  std::string key;  // the item's key; empty outside items
};

/// Where an item lies in its data file.
struct ItemPlace {
  uint64_t offset;
  uint64_t length;
  std::string key;
};

/// The spans of a data file of `file_size` bytes holding `items` (any order), each item an
/// undamaged `torch.save` archive in `bytes`. Throws std::runtime_error when an item does not
/// parse.
std::vector<Span> map_data_file(const std::string& bytes, std::vector<ItemPlace> items);

/// The span holding byte `offset` (which must lie inside the file the spans map).
const Span& span_at(const std::vector<Span>& spans, uint64_t offset);

}  // namespace dcpp::corruption
