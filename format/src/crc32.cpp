// CRC-32 (zip's reflected polynomial 0x04C11DB7). libdeflate does it with PCLMULQDQ at about
// 14 GB/s per core here; on CPUs with VPCLMULQDQ and AVX-512, dcpp folds 256 bytes per step with
// 512-bit carry-less multiplies (several times faster), then lets libdeflate finish the last
// 16 bytes and the tail. That matters because every byte a checkpoint load reads is checksummed.
//
// Folding (Intel, "Fast CRC Computation Using PCLMULQDQ", reflected form): a 128-bit lane v is
// moved D bits ahead as clmul(v.lo, K(D+32)) ^ clmul(v.hi, K(D-32)), with
// K(n) = reflect32(x^n mod P) << 1. The folded 128 bits have the raw CRC (state 0) of the data they
// replace, which libdeflate computes when given them as 16 bytes with initial value ~0.

#include "format/crc32.h"

#include <libdeflate.h>
#include <zlib.h>

#include <algorithm>
#include <cstring>

#if defined(__x86_64__)
// GCC 12's AVX-512 headers trip its own -Wuninitialized (an undefined-value idiom inside them).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>
#endif

namespace dcpp::detail {

namespace {

#if defined(__x86_64__)

#define DCPP_VPCLMUL_TARGET __attribute__((target("avx512f,avx512vl,vpclmulqdq,pclmul")))

// (lo, hi) = (K(D + 32), K(D - 32)) for a fold distance of D bits.
constexpr uint64_t kFold2048[2] = {0x11542778a, 0x1322d1430};
constexpr uint64_t kFold512[2] = {0x154442bd4, 0x1c6e41596};
constexpr uint64_t kFold384[2] = {0x3db1ecdc, 0x174359406};
constexpr uint64_t kFold256[2] = {0xf1da05aa, 0x15a546366};
constexpr uint64_t kFold128[2] = {0x1751997d0, 0xccaa009e};

DCPP_VPCLMUL_TARGET inline __m128i constants128(const uint64_t (&k)[2]) {
  return _mm_set_epi64x(static_cast<long long>(k[1]), static_cast<long long>(k[0]));
}

DCPP_VPCLMUL_TARGET inline __m512i fold512(__m512i x, __m512i k) {
  return _mm512_xor_si512(_mm512_clmulepi64_epi128(x, k, 0x00),
                          _mm512_clmulepi64_epi128(x, k, 0x11));
}

DCPP_VPCLMUL_TARGET inline __m128i fold128(__m128i x, __m128i k) {
  return _mm_xor_si128(_mm_clmulepi64_si128(x, k, 0x00), _mm_clmulepi64_si128(x, k, 0x11));
}

DCPP_VPCLMUL_TARGET inline __m512i load512(const uint8_t* p) { return _mm512_loadu_si512(p); }

// The 64 bytes at `from + at`; with `copy`, also stored to `to + at` by a non-temporal store (no
// read for ownership, nothing of it left in cache).
template <bool copy>
DCPP_VPCLMUL_TARGET inline __m512i load512(const uint8_t* from, uint8_t* to, std::size_t at) {
  const __m512i y = load512(from + at);
  if constexpr (copy) _mm512_stream_si512(reinterpret_cast<__m512i*>(to + at), y);
  return y;
}

// The CRC-32 of `n` bytes at `p`, continuing from `crc`. With `copy`, the bytes folded are also
// stored to `to` as loaded (one read of `p`), streamed (the caller fences once done; `to` 64-byte
// aligned). Requires n >= 256.
template <bool copy>
DCPP_VPCLMUL_TARGET uint32_t crc32_vpclmul(uint32_t crc, uint8_t* to, const uint8_t* p,
                                           std::size_t n) {
  const __m512i k2048 = _mm512_broadcast_i32x4(constants128(kFold2048));
  const __m512i k512 = _mm512_broadcast_i32x4(constants128(kFold512));
  const __m512i state =
      _mm512_inserti32x4(_mm512_setzero_si512(), _mm_cvtsi32_si128(static_cast<int>(~crc)), 0);
  __m512i x0 = _mm512_xor_si512(load512<copy>(p, to, 0), state);
  __m512i x1 = load512<copy>(p, to, 64);
  __m512i x2 = load512<copy>(p, to, 128);
  __m512i x3 = load512<copy>(p, to, 192);
  std::size_t at = 256;
  for (; n - at >= 256; at += 256) {
    x0 = _mm512_xor_si512(fold512(x0, k2048), load512<copy>(p, to, at));
    x1 = _mm512_xor_si512(fold512(x1, k2048), load512<copy>(p, to, at + 64));
    x2 = _mm512_xor_si512(fold512(x2, k2048), load512<copy>(p, to, at + 128));
    x3 = _mm512_xor_si512(fold512(x3, k2048), load512<copy>(p, to, at + 192));
  }
  __m512i x = _mm512_xor_si512(fold512(x0, k512), x1);
  x = _mm512_xor_si512(fold512(x, k512), x2);
  x = _mm512_xor_si512(fold512(x, k512), x3);
  for (; n - at >= 64; at += 64) {
    x = _mm512_xor_si512(fold512(x, k512), load512<copy>(p, to, at));
  }
  if constexpr (copy) std::memcpy(to + at, p + at, n - at);
  __m128i folded = _mm512_extracti32x4_epi32(x, 3);
  folded = _mm_xor_si128(folded, fold128(_mm512_extracti32x4_epi32(x, 0), constants128(kFold384)));
  folded = _mm_xor_si128(folded, fold128(_mm512_extracti32x4_epi32(x, 1), constants128(kFold256)));
  folded = _mm_xor_si128(folded, fold128(_mm512_extracti32x4_epi32(x, 2), constants128(kFold128)));
  alignas(16) uint8_t last[16];
  _mm_store_si128(reinterpret_cast<__m128i*>(last), folded);
  const uint32_t head = libdeflate_crc32(0xFFFFFFFFu, last, sizeof(last));
  return libdeflate_crc32(head, p + at, n - at);
}

#pragma GCC diagnostic pop

bool has_vpclmul() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("vpclmulqdq") && __builtin_cpu_supports("avx512f") &&
         __builtin_cpu_supports("avx512vl");
}

#endif

}  // namespace

uint32_t crc32(uint32_t crc, const void* data, std::size_t n) {
#if defined(__x86_64__)
  static const bool vpclmul = has_vpclmul();
  if (vpclmul && n >= 256) {
    return crc32_vpclmul<false>(crc, nullptr, static_cast<const uint8_t*>(data), n);
  }
#endif
  return libdeflate_crc32(crc, data, n);
}

uint32_t crc32_copy(uint32_t crc, void* to, const void* from, std::size_t n) {
  auto* out = static_cast<uint8_t*>(to);
  const auto* in = static_cast<const uint8_t*>(from);
#if defined(__x86_64__)
  static const bool vpclmul = has_vpclmul();
  // Bytes up to `to`'s next 64-byte boundary first, so that the 512-bit stores are aligned.
  const std::size_t head = (64 - reinterpret_cast<uintptr_t>(out) % 64) % 64;
  if (vpclmul && n >= head + 256) {
    std::memcpy(out, in, head);
    crc = libdeflate_crc32(crc, in, head);
    crc = crc32_vpclmul<true>(crc, out + head, in + head, n - head);
    _mm_sfence();  // the streamed stores are ordered before whatever the caller does next
    return crc;
  }
#endif
  // Elsewhere: blocks that stay in cache between the checksum and the copy.
  constexpr std::size_t kBlock = 256 << 10;
  for (std::size_t done = 0; done < n; done += kBlock) {
    const std::size_t length = std::min(kBlock, n - done);
    crc = crc32(crc, in + done, length);
    std::memcpy(out + done, in + done, length);
  }
  return crc;
}

uint32_t crc32_libdeflate(uint32_t crc, const void* data, std::size_t n) {
  return libdeflate_crc32(crc, data, n);
}

uint32_t crc32_combine(uint32_t crc_a, uint32_t crc_b, uint64_t length_b) {
  return static_cast<uint32_t>(::crc32_combine(crc_a, crc_b, static_cast<z_off_t>(length_b)));
}

}  // namespace dcpp::detail
