#pragma once
// The Hugging Face safetensors format: an 8-byte little-endian header length N, N bytes of JSON
// (each tensor's "dtype", "shape" and "data_offsets" [begin, end) into the data that follows, and
// an optional "__metadata__" object of strings; padded with spaces to a multiple of 8), then the
// tensors' bytes, row-major, little-endian, back to back.

#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace dcpp::tools {

/// "F32", "BF16", "I64", "BOOL", ...; nullopt for dtypes safetensors has no name for (complex,
/// quantized).
std::optional<std::string> safetensors_dtype_name(at::ScalarType dtype);
/// The dtype of a safetensors name; nullopt for names unknown here (or to this libtorch).
std::optional<at::ScalarType> dtype_from_safetensors_name(std::string_view name);

/// The bytes that start a safetensors file with `header` (length, JSON, space padding).
std::string encode_safetensors_header(const nlohmann::json& header);

/// The largest header accepted on reading (the reference implementation's limit: 100 MB).
constexpr uint64_t kMaxSafetensorsHeader = 100'000'000;

}  // namespace dcpp::tools
