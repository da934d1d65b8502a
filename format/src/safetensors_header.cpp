#include "format/safetensors_header.h"

#include <dcpp/core/checkpoint_error.h>
#include <dcpp/core/torch_compat.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <limits>
#include <set>
#include <tuple>

namespace dcpp::detail {

namespace {

using nlohmann::json;

struct Name {
  at::ScalarType dtype;
  const char* name;
};

const Name kNames[] = {
    {at::kDouble, "F64"},
    {at::kFloat, "F32"},
    {at::kHalf, "F16"},
    {at::kBFloat16, "BF16"},
    {at::kLong, "I64"},
    {at::kInt, "I32"},
    {at::kShort, "I16"},
    {at::kChar, "I8"},
    {at::kByte, "U8"},
    {at::kBool, "BOOL"},
#ifdef DCPP_HAS_FLOAT8
    {at::ScalarType::Float8_e5m2, "F8_E5M2"},
    {at::ScalarType::Float8_e4m3fn, "F8_E4M3"},
#endif
};

constexpr const char* kMetadataKey = "__metadata__";

// A JSON value as an unsigned 64-bit integer no larger than `limit`; nullopt otherwise (negative,
// fractional, not a number, too large).
std::optional<uint64_t> as_unsigned(const json& value, uint64_t limit) {
  if (!value.is_number_unsigned()) return std::nullopt;
  const uint64_t n = value.get<uint64_t>();
  if (n > limit) return std::nullopt;
  return n;
}

SafetensorsTensor parse_tensor(const std::string& name, const json& info, uint64_t data_size,
                               const std::string& where) {
  const std::string at_key = where + ", key '" + name + "'";
  if (!info.is_object() || !info.contains("dtype") || !info["dtype"].is_string() ||
      !info.contains("shape") || !info["shape"].is_array() || !info.contains("data_offsets") ||
      !info["data_offsets"].is_array() || info["data_offsets"].size() != 2) {
    throw CheckpointError(ErrorKind::kCorrupt,
                          at_key +
                              ": the header entry needs \"dtype\" (a string), \"shape\" (a "
                              "list) and \"data_offsets\" (two integers); the file is malformed");
  }
  SafetensorsTensor tensor;
  tensor.name = name;
  const std::string dtype_name = info["dtype"].get<std::string>();
  const auto dtype = dtype_from_safetensors_name(dtype_name);
  if (!dtype) {
    throw CheckpointError(
        ErrorKind::kIncompatible,
        at_key + ": dtype \"" + dtype_name +
            "\" is not one dcpp reads (F64, F32, F16, BF16, I64, I32, I16, I8, U8, "
            "BOOL, F8_E5M2, F8_E4M3)");
  }
  tensor.dtype = *dtype;
  for (const json& size : info["shape"]) {
    const auto n = as_unsigned(size, static_cast<uint64_t>(std::numeric_limits<int64_t>::max()));
    if (!n) {
      throw CheckpointError(ErrorKind::kCorrupt,
                            at_key + ": shape " + info["shape"].dump() +
                                " holds a size that is not a non-negative integer");
    }
    tensor.shape.push_back(static_cast<int64_t>(*n));
  }
  const json& offsets = info["data_offsets"];
  const auto begin = as_unsigned(offsets[0], std::numeric_limits<uint64_t>::max());
  const auto end = as_unsigned(offsets[1], std::numeric_limits<uint64_t>::max());
  if (!begin || !end) {
    throw CheckpointError(ErrorKind::kCorrupt, at_key + ": data_offsets " + offsets.dump() +
                                                   " are not non-negative integers");
  }
  tensor.begin = *begin;
  tensor.end = *end;
  const auto nbytes = safetensors_nbytes(tensor.dtype, tensor.shape);
  if (!nbytes || tensor.begin > tensor.end || tensor.end > data_size ||
      tensor.end - tensor.begin != *nbytes) {
    throw CheckpointError(ErrorKind::kCorrupt,
                          at_key + ": data_offsets [" + std::to_string(tensor.begin) + ", " +
                              std::to_string(tensor.end) + ") do not hold exactly the tensor's " +
                              (nbytes ? std::to_string(*nbytes) : std::string("(overflowing)")) +
                              " bytes inside the file's " + std::to_string(data_size) +
                              " bytes of data; the file is truncated or malformed");
  }
  return tensor;
}

}  // namespace

const std::string* SafetensorsHeader::find_metadata(const std::string& key) const {
  for (const auto& [name, value] : metadata) {
    if (name == key) return &value;
  }
  return nullptr;
}

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

std::optional<uint64_t> safetensors_nbytes(at::ScalarType dtype,
                                           const std::vector<int64_t>& shape) {
  unsigned __int128 n = c10::elementSize(dtype);
  for (int64_t size : shape) {
    if (size < 0) return std::nullopt;
    n *= static_cast<uint64_t>(size);
    if (n > std::numeric_limits<uint64_t>::max()) return std::nullopt;
  }
  return static_cast<uint64_t>(n);
}

uint64_t decode_safetensors_header_length(std::string_view first_bytes, uint64_t file_size,
                                          const std::string& where, uint64_t max_header) {
  if (file_size < 8 || first_bytes.size() < 8) {
    throw CheckpointError(ErrorKind::kCorrupt,
                          where +
                              " is shorter than the 8-byte header length of a safetensors "
                              "file; it is truncated or not a safetensors file");
  }
  uint64_t length = 0;
  for (int i = 7; i >= 0; --i) {
    length = (length << 8) | static_cast<unsigned char>(first_bytes[static_cast<std::size_t>(i)]);
  }
  if (length > max_header || length > file_size - 8) {
    throw CheckpointError(ErrorKind::kCorrupt,
                          where + ": header length " + std::to_string(length) +
                              " is larger than the file (" + std::to_string(file_size) +
                              " bytes) or the " + std::to_string(max_header) +
                              "-byte limit; the file is truncated or not a safetensors file");
  }
  return length;
}

SafetensorsHeader parse_safetensors_header(std::string_view text, uint64_t data_size,
                                           const std::string& where) {
  // Names seen at the top level: JSON allows a key twice, and the DOM would keep only one.
  std::set<std::string> names;
  std::string duplicate;
  const json::parser_callback_t callback = [&](int depth, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::key && depth == 1 && parsed.is_string()) {
      if (!names.insert(parsed.get<std::string>()).second && duplicate.empty()) {
        duplicate = parsed.get<std::string>();
      }
    }
    return true;
  };
  json header;
  try {
    header = json::parse(text.begin(), text.end(), callback);
  } catch (const json::exception& error) {
    throw CheckpointError(ErrorKind::kCorrupt,
                          where + ": the header is not valid JSON (" + error.what() +
                              "); the file is truncated or not a safetensors file");
  }
  if (!header.is_object()) {
    throw CheckpointError(ErrorKind::kCorrupt,
                          where + ": the header is not a JSON object; not a safetensors file");
  }
  if (!duplicate.empty()) {
    throw CheckpointError(
        ErrorKind::kCorrupt,
        where + ", key '" + duplicate + "': the header names it twice; the file is malformed");
  }
  SafetensorsHeader result;
  result.data_start = 8 + text.size();
  for (const auto& [name, info] : header.items()) {
    if (name == kMetadataKey) {
      if (!info.is_object()) {
        throw CheckpointError(ErrorKind::kCorrupt,
                              where + ": \"__metadata__\" is not an object of strings");
      }
      for (const auto& [key, value] : info.items()) {
        if (!value.is_string()) {
          throw CheckpointError(ErrorKind::kCorrupt,
                                where + ": \"__metadata__\" entry '" + key + "' is not a string");
        }
        result.metadata.emplace_back(key, value.get<std::string>());
      }
      continue;
    }
    result.tensors.push_back(parse_tensor(name, info, data_size, where));
  }
  // File order; an empty tensor (no bytes) before a non-empty one at the same offset.
  std::stable_sort(result.tensors.begin(), result.tensors.end(),
                   [](const SafetensorsTensor& a, const SafetensorsTensor& b) {
                     return std::tie(a.begin, a.end) < std::tie(b.begin, b.end);
                   });
  const SafetensorsTensor* before = nullptr;  // the last tensor holding bytes
  for (const SafetensorsTensor& tensor : result.tensors) {
    if (tensor.begin == tensor.end) continue;  // no bytes: overlaps nothing
    if (before != nullptr && tensor.begin < before->end) {
      throw CheckpointError(ErrorKind::kCorrupt,
                            where + ", key '" + tensor.name + "': its bytes [" +
                                std::to_string(tensor.begin) + ", " + std::to_string(tensor.end) +
                                ") overlap those of '" + before->name + "' [" +
                                std::to_string(before->begin) + ", " + std::to_string(before->end) +
                                "); the file is malformed");
    }
    before = &tensor;
  }
  return result;
}

std::string encode_safetensors_header(
    const std::vector<SafetensorsTensor>& tensors,
    const std::vector<std::pair<std::string, std::string>>& metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) {
    nlohmann::ordered_json values = nlohmann::ordered_json::object();
    for (const auto& [key, value] : metadata) values[key] = value;
    header[kMetadataKey] = std::move(values);
  }
  for (const SafetensorsTensor& tensor : tensors) {
    const auto name = safetensors_dtype_name(tensor.dtype);
    if (!name) {
      throw CheckpointError(ErrorKind::kUsage,
                            "tensor '" + tensor.name + "' is " + c10::toString(tensor.dtype) +
                                ", which safetensors cannot hold; cast it to a real dtype first");
    }
    header[tensor.name] = {
        {"dtype", *name}, {"shape", tensor.shape}, {"data_offsets", {tensor.begin, tensor.end}}};
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  std::string out(8, '\0');
  const uint64_t n = text.size();
  for (int i = 0; i < 8; ++i)
    out[static_cast<std::size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out + text;
}

}  // namespace dcpp::detail
