#include "s3/protocol/content_crc32c.h"

#include <isa-l/crc.h>
#include <openssl/evp.h>

#include <algorithm>

namespace dcpp::detail {

uint32_t crc32c(std::string_view bytes) {
  // ISA-L's crc32_iscsi takes an int length and the inverted running value.
  constexpr std::size_t kChunk = std::size_t{1} << 30;
  unsigned int running = 0xFFFFFFFFu;
  for (std::size_t at = 0; at < bytes.size(); at += kChunk) {
    const std::size_t n = std::min(kChunk, bytes.size() - at);
    running = crc32_iscsi(reinterpret_cast<unsigned char*>(const_cast<char*>(bytes.data() + at)),
                          static_cast<int>(n), running);
  }
  return running ^ 0xFFFFFFFFu;
}

std::string content_crc32c(std::string_view body) {
  const uint32_t crc = crc32c(body);
  const unsigned char big_endian[4] = {
      static_cast<unsigned char>(crc >> 24), static_cast<unsigned char>(crc >> 16),
      static_cast<unsigned char>(crc >> 8), static_cast<unsigned char>(crc)};
  unsigned char encoded[9];
  const int length = EVP_EncodeBlock(encoded, big_endian, 4);
  return std::string(reinterpret_cast<const char*>(encoded), static_cast<std::size_t>(length));
}

}  // namespace dcpp::detail
