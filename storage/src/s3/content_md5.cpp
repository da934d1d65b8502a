#include "s3/content_md5.h"

#include <openssl/evp.h>

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

}  // namespace dcpp::detail
