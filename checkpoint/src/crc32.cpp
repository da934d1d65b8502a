#include "crc32.h"

#include <libdeflate.h>
#include <zlib.h>

namespace dcpp::detail {

uint32_t crc32(uint32_t crc, const void* data, std::size_t n) {
  return libdeflate_crc32(crc, data, n);
}

uint32_t crc32_combine(uint32_t crc_a, uint32_t crc_b, uint64_t length_b) {
  return static_cast<uint32_t>(::crc32_combine(crc_a, crc_b, static_cast<z_off_t>(length_b)));
}

}  // namespace dcpp::detail
