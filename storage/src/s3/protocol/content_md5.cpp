#include "s3/protocol/content_md5.h"

#include <openssl/evp.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>

namespace dcpp::detail {

std::string content_md5(std::string_view body) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int digest_size = 0;
  if (EVP_Digest(body.data(), body.size(), digest, &digest_size, EVP_md5(), nullptr) != 1) {
    throw std::runtime_error("OpenSSL's MD5 failed");
  }
  unsigned char encoded[4 * ((EVP_MAX_MD_SIZE + 2) / 3) + 1];
  const int length = EVP_EncodeBlock(encoded, digest, static_cast<int>(digest_size));
  return std::string(reinterpret_cast<const char*>(encoded), static_cast<size_t>(length));
}

std::optional<std::string> multipart_etag(const std::vector<std::string>& part_etags) {
  std::string digests;
  for (std::string etag : part_etags) {
    if (etag.size() == 34 && etag.front() == '"' && etag.back() == '"') {
      etag = etag.substr(1, 32);
    }
    if (etag.size() != 32) return std::nullopt;
    for (size_t i = 0; i < 32; i += 2) {
      const std::string byte = etag.substr(i, 2);
      char* end = nullptr;
      const long value = std::strtol(byte.c_str(), &end, 16);
      if (*end != '\0' || !std::isxdigit(static_cast<unsigned char>(byte[0]))) return std::nullopt;
      digests += static_cast<char>(value);
    }
  }
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int digest_size = 0;
  if (EVP_Digest(digests.data(), digests.size(), digest, &digest_size, EVP_md5(), nullptr) != 1) {
    throw std::runtime_error("OpenSSL's MD5 failed");
  }
  std::string etag = "\"";
  for (unsigned int i = 0; i < digest_size; ++i) {
    char hex[3];
    std::snprintf(hex, sizeof(hex), "%02x", digest[i]);
    etag += hex;
  }
  return etag + "-" + std::to_string(part_etags.size()) + "\"";
}

}  // namespace dcpp::detail
