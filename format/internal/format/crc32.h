#pragma once
// CRC-32 with zip's polynomial: 512-bit folding or libdeflate's, and zlib's to combine.

#include <cstddef>
#include <cstdint>

namespace dcpp::detail {

/// CRC-32 of `n` bytes, continuing from `crc` (0 to start). Uses VPCLMULQDQ where the CPU has it.
uint32_t crc32(uint32_t crc, const void* data, std::size_t n);
/// Copies `n` bytes from `from` to `to` (not overlapping) and returns their CRC-32, continuing
/// from `crc`: one read of `from`. Where the CPU has VPCLMULQDQ, `to` is written with
/// non-temporal stores: it costs no read and is not left in cache (for copies that nothing reads
/// soon, or too large for the cache: a memory step into its slot and back out). About a `memcpy`'s
/// time: a copy, then a CRC of the copy, takes 1.5 to 1.9 times that.
uint32_t crc32_copy(uint32_t crc, void* to, const void* from, std::size_t n);
/// The same as crc32, always by libdeflate: the reference the fast path is tested against.
uint32_t crc32_libdeflate(uint32_t crc, const void* data, std::size_t n);
/// The CRC-32 of A followed by B, from the CRC-32s of A and B and the length of B.
uint32_t crc32_combine(uint32_t crc_a, uint32_t crc_b, uint64_t length_b);

}  // namespace dcpp::detail
