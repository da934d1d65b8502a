#pragma once
// The Hugging Face safetensors header codec: an 8-byte little-endian header length N, N bytes of
// JSON (each tensor's "dtype", "shape" and "data_offsets" [begin, end) into the data that follows,
// and an optional "__metadata__" object of strings; padded with spaces to a multiple of 8), then
// the tensors' bytes, row-major, little-endian, back to back. Used by the Hugging Face storage
// reader and writer (huggingface_storage.h) and by the `dcpp` tools. Pure functions, thread-safe.

#include <c10/core/ScalarType.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace dcpp::detail {

/// The largest header accepted on reading (the reference implementation's limit: 100 MB).
constexpr uint64_t kMaxSafetensorsHeader = 100'000'000;

/// One tensor of a header. `begin`/`end` are "data_offsets": relative to the first data byte.
struct SafetensorsTensor {
  std::string name;
  at::ScalarType dtype = at::kFloat;
  std::vector<int64_t> shape;
  uint64_t begin = 0;
  uint64_t end = 0;
};

struct SafetensorsHeader {
  /// In file order (by `begin`, then `end`: an empty tensor first; other ties in header order).
  std::vector<SafetensorsTensor> tensors;
  /// "__metadata__", in header order.
  std::vector<std::pair<std::string, std::string>> metadata;
  /// Where the data starts in the file: 8 + the header length.
  uint64_t data_start = 0;

  /// The value of metadata key `key`, or nullptr.
  const std::string* find_metadata(const std::string& key) const;
};

/// "F32", "BF16", "I64", "BOOL", ...; nullopt for dtypes safetensors has no name for (complex,
/// quantized).
std::optional<std::string> safetensors_dtype_name(at::ScalarType dtype);
/// The dtype of a safetensors name; nullopt for names unknown here (or to this libtorch).
std::optional<at::ScalarType> dtype_from_safetensors_name(std::string_view name);

/// The header length that the first 8 bytes of a `file_size`-byte file announce. Throws
/// CheckpointError naming `where` when the file is shorter than 8 bytes, or the length is past
/// the file's end or above `max_header`.
uint64_t decode_safetensors_header_length(std::string_view first_bytes, uint64_t file_size,
                                          const std::string& where,
                                          uint64_t max_header = kMaxSafetensorsHeader);

/// Parses the JSON header `text` of a file with `data_size` bytes after its header, checking
/// everything before anything is read: a JSON object, each tensor an object with exactly a known
/// "dtype", a "shape" of non-negative integers and two "data_offsets" that hold exactly the
/// tensor's bytes inside the data, no two tensors' bytes overlapping, no name twice,
/// "__metadata__" an object of strings. Throws CheckpointError naming `where` and the key.
/// `data_start` of the result is 8 + text.size().
SafetensorsHeader parse_safetensors_header(std::string_view text, uint64_t data_size,
                                           const std::string& where);

/// The bytes that start a safetensors file: the length, the JSON ("__metadata__" first, when not
/// empty, then the tensors in the given order) and space padding to a multiple of 8. Throws
/// CheckpointError for a dtype safetensors cannot name.
std::string encode_safetensors_header(
    const std::vector<SafetensorsTensor>& tensors,
    const std::vector<std::pair<std::string, std::string>>& metadata);

/// Bytes of a tensor of `dtype` and `shape`; nullopt when a size is negative or it overflows.
std::optional<uint64_t> safetensors_nbytes(at::ScalarType dtype, const std::vector<int64_t>& shape);

}  // namespace dcpp::detail
