#include "safetensors_format.h"

#include <dcpp/core/torch_compat.h>

#include <array>
#include <utility>

namespace dcpp::tools {

namespace {

struct Name {
  at::ScalarType dtype;
  const char* name;
};

const Name kNames[] = {
    {at::kDouble, "F64"},  {at::kFloat, "F32"},  {at::kHalf, "F16"},   {at::kBFloat16, "BF16"},
    {at::kLong, "I64"},    {at::kInt, "I32"},    {at::kShort, "I16"},  {at::kChar, "I8"},
    {at::kByte, "U8"},     {at::kBool, "BOOL"},
#ifdef DCPP_HAS_FLOAT8
    {at::ScalarType::Float8_e5m2, "F8_E5M2"}, {at::ScalarType::Float8_e4m3fn, "F8_E4M3"},
#endif
};

}  // namespace

std::optional<std::string> safetensors_dtype_name(at::ScalarType dtype) {
  for (const Name& entry : kNames) {
    if (entry.dtype == dtype) return std::string(entry.name);
  }
  return std::nullopt;
}

std::optional<at::ScalarType> dtype_from_safetensors_name(std::string_view name) {
  for (const Name& entry : kNames) {
    if (name == entry.name) return entry.dtype;
  }
  return std::nullopt;
}

std::string encode_safetensors_header(const nlohmann::json& header) {
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  std::string out(8, '\0');
  uint64_t n = text.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out + text;
}

}  // namespace dcpp::tools
