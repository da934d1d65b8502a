#include "safetensors_header.h"

#include <dcpp/core/checkpoint_error.h>
#include <dcpp/core/torch_compat.h>

#include <nlohmann/json.hpp>

#include <algorithm>

namespace dcpp::detail {

namespace {

using nlohmann::json;

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

SafetensorsEntry parse_entry(const std::string& name, const json& info, uint64_t data_size,
                             const std::string& what) {
  const std::string where = what + ", tensor '" + name + "'";
  if (!info.is_object() || !info.contains("dtype") || !info["dtype"].is_string() ||
      !info.contains("shape") || !info["shape"].is_array() || !info.contains("data_offsets") ||
      !info["data_offsets"].is_array() || info["data_offsets"].size() != 2) {
    throw CheckpointError(where + ": needs \"dtype\", \"shape\" and two \"data_offsets\"");
  }
  SafetensorsEntry entry;
  entry.name = name;
  const std::string dtype = info["dtype"].get<std::string>();
  const auto known = dtype_from_safetensors_name(dtype);
  if (!known) {
    throw CheckpointError(where + ": dtype " + dtype + " is not supported");
  }
  entry.dtype = *known;
  // The product is kept bounded: anything past the data is too large either way.
  uint64_t nbytes = c10::elementSize(entry.dtype);
  for (const json& size : info["shape"]) {
    if (!size.is_number_unsigned() || size.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
      throw CheckpointError(where + ": a size of its shape is not an integer >= 0");
    }
    const uint64_t n = size.get<uint64_t>();
    entry.shape.push_back(static_cast<int64_t>(n));
    nbytes = (n != 0 && nbytes > (data_size + 1) / n) ? data_size + 1 : nbytes * n;
  }
  const json& offsets = info["data_offsets"];
  if (!offsets[0].is_number_unsigned() || !offsets[1].is_number_unsigned()) {
    throw CheckpointError(where + ": data_offsets are not integers >= 0");
  }
  entry.begin = offsets[0].get<uint64_t>();
  entry.end = offsets[1].get<uint64_t>();
  if (entry.begin > entry.end || entry.end > data_size || entry.end - entry.begin != nbytes) {
    throw CheckpointError(where + ": data_offsets [" + std::to_string(entry.begin) + ", " +
                          std::to_string(entry.end) + ") do not hold the tensor's " +
                          (nbytes > data_size ? std::string("too many")
                                              : std::to_string(nbytes)) +
                          " bytes inside the " + std::to_string(data_size) +
                          " bytes of data (a truncated or damaged file)");
  }
  return entry;
}

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

const SafetensorsEntry* SafetensorsHeader::find(std::string_view name) const {
  for (const SafetensorsEntry& entry : entries) {
    if (entry.name == name) return &entry;
  }
  return nullptr;
}

uint64_t decode_safetensors_header_length(const unsigned char (&first)[8], uint64_t available,
                                          const std::string& what) {
  uint64_t length = 0;
  for (int i = 7; i >= 0; --i) length = (length << 8) | first[i];
  if (length > kMaxSafetensorsHeader || length > available) {
    throw CheckpointError(what + ": safetensors header length " + std::to_string(length) +
                          " is larger than the " + std::to_string(available) +
                          " bytes that follow it or the 100 MB limit (not a safetensors header, "
                          "or a damaged one)");
  }
  return length;
}

SafetensorsHeader parse_safetensors_header(std::string_view text, uint64_t data_size,
                                           const std::string& what) {
  json header;
  try {
    header = json::parse(text.begin(), text.end());
  } catch (const json::exception& error) {
    throw CheckpointError(what + ": the safetensors header is not valid JSON: " + error.what());
  }
  if (!header.is_object()) {
    throw CheckpointError(what + ": the safetensors header is not a JSON object");
  }
  SafetensorsHeader parsed;
  parsed.data_start = 8 + text.size();
  for (const auto& [name, info] : header.items()) {
    if (name == "__metadata__") {
      if (!info.is_object()) {
        throw CheckpointError(what + ": the safetensors \"__metadata__\" is not an object");
      }
      for (const auto& [key, value] : info.items()) {
        if (!value.is_string()) {
          throw CheckpointError(what + ": safetensors metadata '" + key + "' is not a string");
        }
        parsed.metadata[key] = value.get<std::string>();
      }
      continue;
    }
    parsed.entries.push_back(parse_entry(name, info, data_size, what));
  }
  // nlohmann's objects keep one value per key (the last): names are unique here.
  std::stable_sort(parsed.entries.begin(), parsed.entries.end(),
                   [](const SafetensorsEntry& a, const SafetensorsEntry& b) {
                     return a.begin < b.begin;
                   });
  return parsed;
}

std::string encode_safetensors_header(const std::vector<SafetensorsEntry>& entries,
                                      const std::map<std::string, std::string>& metadata) {
  json header = json::object();
  if (!metadata.empty()) {
    header["__metadata__"] = metadata;
  }
  for (const SafetensorsEntry& entry : entries) {
    const auto dtype = safetensors_dtype_name(entry.dtype);
    if (!dtype) {
      throw CheckpointError("tensor '" + entry.name + "' is " + c10::toString(entry.dtype) +
                            ", which safetensors cannot hold");
    }
    header[entry.name] = {
        {"dtype", *dtype}, {"shape", entry.shape}, {"data_offsets", {entry.begin, entry.end}}};
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  std::string out(8, '\0');
  const uint64_t n = text.size();
  for (int i = 0; i < 8; ++i) out[static_cast<std::size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out + text;
}

}  // namespace dcpp::detail
