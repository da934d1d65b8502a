#pragma once
// The CRC-32C (Castagnoli) of an upload's bytes, as S3's flexible checksums send it
// (x-amz-checksum-crc32c: the base64 of its four bytes, most significant first). Computed by
// ISA-L (Debian's libisal), with the CPU's CRC32 instruction where there is one.

#include <cstdint>
#include <string>
#include <string_view>

namespace dcpp::detail {

/// CRC-32C of `bytes` ("123456789" gives 0xE3069283).
uint32_t crc32c(std::string_view bytes);

/// The x-amz-checksum-crc32c value of `body`: base64 of crc32c(body), big-endian.
std::string content_crc32c(std::string_view body);

}  // namespace dcpp::detail
