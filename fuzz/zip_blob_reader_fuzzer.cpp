// Fuzz target: the zip reader every data item goes through (zip_blob_reader), over memory.
//
// Contract checked: any bytes either parse or throw CheckpointError, never reading outside the
// input; a parsed archive's records lie inside it, have distinct names, are found by name, and read
// (whole, with the CRC-32 check, or in part) without leaving their bounds.

#include "format/byte_io.h"
#include "format/zip/zip_blob_reader.h"

#include <dcpp/core/checkpoint_error.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

namespace {

using namespace dcpp::detail;

// Records may share payload bytes, so reading them all is quadratic in a hostile input: stop after
// this many payload bytes per input.
constexpr uint64_t kReadBudget = uint64_t{4} << 20;

void read_records(const ZipBlobReader& zip, uint64_t input_size) {
  uint64_t budget = kReadBudget;
  for (const ZipRecordInfo& record : zip.records()) {
    if (record.data_offset > input_size || record.size > input_size - record.data_offset ||
        zip.find(record.name) != &record) {
      std::abort();  // a record outside the input, or names that are not unique
    }
    if (record.size > budget) break;
    budget -= record.size;
    try {
      const std::string payload = zip.read_string(record, /*verify_crc=*/true);
    } catch (const dcpp::CheckpointError&) {
      // a CRC-32 mismatch; the other records still read
    }
    if (record.size > 0) {
      char edge[2];
      zip.read_range(record, 0, edge, 1);
      zip.read_range(record, record.size - 1, edge + 1, 1);
    }
    try {
      char past;
      zip.read_range(record, record.size, &past, 1);
      std::abort();  // a read past the record's end must be refused
    } catch (const dcpp::CheckpointError&) {
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  const MemorySource source(bytes, "fuzz input");
  try {
    const ZipBlobReader zip(source);
    read_records(zip, size);
    zip.get("data.pkl");
  } catch (const dcpp::CheckpointError&) {
  }
  return 0;
}
