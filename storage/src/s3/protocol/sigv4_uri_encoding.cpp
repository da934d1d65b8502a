#include "s3/protocol/sigv4_uri_encoding.h"

#include <algorithm>

namespace dcpp::detail {

std::string s3_uri_encode(std::string_view text, bool encode_slash) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    const bool unreserved = (byte >= 'A' && byte <= 'Z') || (byte >= 'a' && byte <= 'z') ||
                            (byte >= '0' && byte <= '9') || byte == '-' || byte == '_' ||
                            byte == '.' || byte == '~';
    if (unreserved || (byte == '/' && !encode_slash)) {
      out += c;
    } else {
      out += '%';
      out += kHex[byte >> 4];
      out += kHex[byte & 0xf];
    }
  }
  return out;
}

std::string s3_canonical_query(std::vector<std::pair<std::string, std::string>> params) {
  for (auto& [name, value] : params) {
    name = s3_uri_encode(name, true);
    value = s3_uri_encode(value, true);
  }
  std::sort(params.begin(), params.end());
  std::string out;
  for (const auto& [name, value] : params) {
    if (!out.empty()) out += '&';
    out += name;
    out += '=';
    out += value;
  }
  return out;
}

}  // namespace dcpp::detail
