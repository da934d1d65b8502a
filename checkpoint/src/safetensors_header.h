#pragma once
// The header of a Hugging Face safetensors blob: an 8-byte little-endian length N, then N bytes of
// JSON: for every tensor its "dtype" ("F32", "BF16", ...), "shape" and "data_offsets" [begin, end)
// into the data that follows the header, and an optional "__metadata__" object of strings. The
// writer pads the JSON with spaces to a multiple of 8. Used by DCP's SAFETENSORS item format
// (safetensors_item.h), `dcpp convert --to safetensors` and the safetensors sources.
//
// Parsing trusts nothing: the length is bounded (kMaxSafetensorsHeader and the bytes available),
// every dtype must be known, every size non-negative, and every data range must hold exactly its
// tensor's bytes inside the data. Errors are CheckpointErrors that start with the caller's `what`.

#include <c10/core/ScalarType.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dcpp::detail {

/// The largest header accepted on reading (the reference implementation's limit: 100 MB).
constexpr uint64_t kMaxSafetensorsHeader = 100'000'000;

/// "F32", "BF16", "I64", "BOOL", ...; nullopt for dtypes safetensors has no name for (complex,
/// quantized).
std::optional<std::string> safetensors_dtype_name(at::ScalarType dtype);
/// The dtype of a safetensors name; nullopt for names unknown here (or to this libtorch).
std::optional<at::ScalarType> dtype_from_safetensors_name(std::string_view name);

/// One tensor of a header. `begin`/`end` are relative to the first byte after the header.
struct SafetensorsEntry {
  std::string name;
  at::ScalarType dtype = at::kFloat;
  std::vector<int64_t> shape;
  uint64_t begin = 0;
  uint64_t end = 0;
};

struct SafetensorsHeader {
  /// Every tensor, in the order of their data (by `begin`).
  std::vector<SafetensorsEntry> entries;
  /// "__metadata__", when present.
  std::map<std::string, std::string> metadata;
  /// Bytes before the data: 8 + the JSON's length.
  uint64_t data_start = 0;

  /// The entry named `name`, or nullptr.
  const SafetensorsEntry* find(std::string_view name) const;
};

/// The JSON length that the first 8 bytes of a blob give, checked against the limit and against
/// `available` (the bytes of the blob after those 8). Throws CheckpointError.
uint64_t decode_safetensors_header_length(const unsigned char (&first)[8], uint64_t available,
                                          const std::string& what);

/// Parses the JSON of a header whose data holds `data_size` bytes. Throws CheckpointError when it
/// is not JSON, not an object, names a tensor twice, or any entry fails the checks above.
SafetensorsHeader parse_safetensors_header(std::string_view json, uint64_t data_size,
                                           const std::string& what);

/// The bytes that start a safetensors blob of `entries` (any order; their data_offsets as given)
/// and `metadata` (no "__metadata__" object when empty): length, JSON, space padding. Throws
/// CheckpointError for a dtype safetensors has no name for.
std::string encode_safetensors_header(const std::vector<SafetensorsEntry>& entries,
                                      const std::map<std::string, std::string>& metadata);

}  // namespace dcpp::detail
