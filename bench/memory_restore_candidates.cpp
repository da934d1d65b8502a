// The candidates for reading a memory-tier region in a new process (issue 60, finding 5), side by
// side, without libtorch (each run is a process of its own, as a restarted rank is):
//
//   memory_restore_candidates create NAME GIB          a region: a header page, then GIB GiB
//   memory_restore_candidates read NAME GIB MODE [1]   one read of it into a touched buffer
//
// NAME: a shm_open name ("/x", in /dev/shm) or a path under /tmp/ (e.g. a tmpfs mounted with
// huge=always). MODE: mmap (copy out of a plain mapping), mmap_populate_map (MAP_POPULATE),
// mmap_populate_read (MADV_POPULATE_READ), mmap_huge (MADV_HUGEPAGE), mmap_crcfirst_populate_read
// (the CRC over the mapping, then the copy: the manager's restore before issue 60),
// mmap_populate_read_par1 / _par2 (copy and CRC in one pass, 1 or 2 threads), pread, pread2
// (pread(2) into the buffer, 1 or 2 threads). Every mode checks the CRC-32 of what it read.
// Environment: ALIGN=1 maps on a 2 MiB boundary; at create, MIDCOLLAPSE=1 asks for huge pages
// (MADV_COLLAPSE) after posix_fallocate, as MemorySlots does; SPLIT=1 times populate, first and
// second copy and CRC apart; in the _par modes, BLOCK sets the block (256 KiB), and instead of
// copying a block then checksumming the copy: SRCCRC=1 checksums the source block then memcpy's
// it, NT=1 then copies it with non-temporal stores (SSE2; with AVX=1, AVX-512), FUSED=1 does both
// in one read (crc32_copy, what MemorySlots and the restore use). Prints the read's time against
// a warm memcpy in the same process.
#include <fcntl.h>
#include <immintrin.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>
#include "format/crc32.h"
// Copies with non-temporal stores (no read for ownership of `to`, nothing of it left in cache).
__attribute__((target("avx512f"))) static void stream_copy512(char* to, const char* from,
                                                              size_t n) {
  size_t i = 0;
  while (i < n && ((uintptr_t)(to + i) & 63) != 0) {
    to[i] = from[i];
    ++i;
  }
  for (; i + 256 <= n; i += 256) {
    __m512i a = _mm512_loadu_si512(from + i);
    __m512i b = _mm512_loadu_si512(from + i + 64);
    __m512i c = _mm512_loadu_si512(from + i + 128);
    __m512i d = _mm512_loadu_si512(from + i + 192);
    _mm512_stream_si512((__m512i*)(to + i), a);
    _mm512_stream_si512((__m512i*)(to + i + 64), b);
    _mm512_stream_si512((__m512i*)(to + i + 128), c);
    _mm512_stream_si512((__m512i*)(to + i + 192), d);
  }
  for (; i < n; ++i) to[i] = from[i];
}
static void stream_copy(char* to, const char* from, size_t n) {
  size_t i = 0;
  while (i < n && ((uintptr_t)(to + i) & 15) != 0) {
    to[i] = from[i];
    ++i;
  }
  for (; i + 64 <= n; i += 64) {
    __m128i a = _mm_loadu_si128((const __m128i*)(from + i));
    __m128i b = _mm_loadu_si128((const __m128i*)(from + i + 16));
    __m128i c = _mm_loadu_si128((const __m128i*)(from + i + 32));
    __m128i d = _mm_loadu_si128((const __m128i*)(from + i + 48));
    _mm_stream_si128((__m128i*)(to + i), a);
    _mm_stream_si128((__m128i*)(to + i + 16), b);
    _mm_stream_si128((__m128i*)(to + i + 32), c);
    _mm_stream_si128((__m128i*)(to + i + 48), d);
  }
  for (; i < n; ++i) to[i] = from[i];
}
using dcpp::detail::crc32;
using dcpp::detail::crc32_combine;
static double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
constexpr size_t kHdr = 4096;
static char* map_aligned(size_t len, int prot, int flags, int fd) {
  const size_t kHuge = 2 << 20;
  if (!getenv("ALIGN")) return (char*)mmap(nullptr, len, prot, flags, fd, 0);
  char* r = (char*)mmap(nullptr, len + kHuge, PROT_NONE,
                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  char* a = (char*)(((uintptr_t)r + kHuge - 1) & ~(kHuge - 1));
  if (a != r) munmap(r, a - r);
  munmap(a + len, (r + len + kHuge) - (a + len));
  return (char*)mmap(a, len, prot, flags | MAP_FIXED, fd, 0);
}
int main(int argc, char** argv) {
  std::string cmd = argv[1], name = argv[2];
  size_t bytes = size_t(atof(argv[3]) * (1ull << 30));
  if (cmd == "create") {
    int fd = name.rfind("/tmp/", 0) == 0 ? open(name.c_str(), O_RDWR | O_CREAT, 0600)
                                         : shm_open(name.c_str(), O_RDWR | O_CREAT, 0600);
    ftruncate(fd, kHdr + bytes);
    char* p = map_aligned(kHdr + bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd);
    if (getenv("EARLYCOLLAPSE")) {
      double t = now();
      int rc = madvise(p, (kHdr + bytes) & ~((2ul << 20) - 1), 25);
      printf("early collapse rc %d errno %d %.1f ms\n", rc, rc ? errno : 0, (now() - t) * 1e3);
    }
    {
      double t = now();
      int rc = posix_fallocate(fd, 0, kHdr + bytes);
      printf("fallocate rc %d %.1f ms\n", rc, (now() - t) * 1e3);
    }
    if (getenv("MIDCOLLAPSE")) {
      double t = now();
      int rc = madvise(p, (kHdr + bytes) & ~((2ul << 20) - 1), 25);
      printf("mid collapse rc %d errno %d %.1f ms\n", rc, rc ? errno : 0, (now() - t) * 1e3);
    }
    double tw = now();
    for (size_t i = 0; i < bytes; i += 8) {
      uint64_t v = i * 0x9E3779B97F4A7C15ull;
      memcpy(p + kHdr + i, &v, 8);
    }
    printf("fill %.1f ms\n", (now() - tw) * 1e3);
    uint32_t c = crc32(0, p + kHdr, bytes);
    memcpy(p, &c, 4);
    if (getenv("COLLAPSE")) {
      double t = now();
      int rc = madvise(p, (kHdr + bytes) & ~((2ul << 20) - 1), 25);
      printf("collapse rc %d errno %d %.1f ms\n", rc, rc ? errno : 0, (now() - t) * 1e3);
    }
    return 0;
  }
  std::string mode = argv[4];
  bool touch = argc > 5 ? atoi(argv[5]) : 1;
  char* dest = (char*)aligned_alloc(4096, bytes);
  double tt = now();
  if (touch) memset(dest, 0, bytes);
  if (getenv("SHOWTOUCH")) printf("touch %.1f ms\n", (now() - tt) * 1e3);
  std::vector<char> a(bytes, 1), b(bytes, 2);
  double m = 1e9;
  for (int r = 0; r < 3; ++r) {
    double t = now();
    memcpy(b.data(), a.data(), bytes);
    m = std::min(m, now() - t);
  }
  double t0 = now();
  int fd = name.rfind("/tmp/", 0) == 0 ? open(name.c_str(), O_RDONLY)
                                       : shm_open(name.c_str(), O_RDONLY, 0);
  uint32_t want;
  pread(fd, &want, 4, 0);
  uint32_t got = 0;
  const size_t kChunk = 1 << 20;
  if (mode.rfind("mmap", 0) == 0) {
    int flags = MAP_SHARED | (mode.find("populate_map") != std::string::npos ? MAP_POPULATE : 0);
    char* p = map_aligned(kHdr + bytes, PROT_READ, flags, fd);
    if (mode.find("huge") != std::string::npos) madvise(p, kHdr + bytes, MADV_HUGEPAGE);
    if (mode.find("populate_read") != std::string::npos) madvise(p, kHdr + bytes, 22);
    double tp = now();
    if (getenv("SPLIT")) {
      double a = now();
      memcpy(dest, p + kHdr, bytes);
      double b = now();
      memcpy(dest, p + kHdr, bytes);
      double c = now();
      uint32_t x = crc32(0, dest, bytes);
      double d = now();
      printf("populate %.1f copy1 %.1f copy2 %.1f crc %.1f (%u)\n", (a - t0) * 1e3, (b - a) * 1e3,
             (c - b) * 1e3, (d - c) * 1e3, x == want);
    }
    if (mode.find("par") != std::string::npos) {
      const size_t kC = 8 << 20, kB = atol(getenv("BLOCK") ? getenv("BLOCK") : "262144");
      size_t nch = (bytes + kC - 1) / kC;
      std::vector<uint32_t> crcs(nch);
      int threads = mode.find("par1") != std::string::npos ? 1 : 2;
      auto work = [&](int t) {
        for (size_t k = t; k < nch; k += threads) {
          size_t o = k * kC, e = std::min(bytes, o + kC);
          uint32_t c = 0;
          for (; o < e; o += kB) {
            size_t n = std::min(kB, e - o);
            if (getenv("FUSED")) {
              c = dcpp::detail::crc32_copy(c, dest + o, p + kHdr + o, n);
            } else if (getenv("NT")) {
              c = crc32(c, p + kHdr + o, n);
              if (getenv("AVX"))
                stream_copy512(dest + o, p + kHdr + o, n);
              else
                stream_copy(dest + o, p + kHdr + o, n);
            } else if (getenv("SRCCRC")) {
              c = crc32(c, p + kHdr + o, n);
              memcpy(dest + o, p + kHdr + o, n);
            } else {
              memcpy(dest + o, p + kHdr + o, n);
              c = crc32(c, dest + o, n);
            }
          }
          crcs[k] = c;
        }
      };
      std::vector<std::thread> ts;
      for (int t = 1; t < threads; ++t) ts.emplace_back(work, t);
      work(0);
      for (auto& th : ts) th.join();
      _mm_sfence();
      for (size_t k = 0; k < nch; ++k) {
        size_t n = std::min(kC, bytes - k * kC);
        got = k == 0 ? crcs[0] : crc32_combine(got, crcs[k], n);
      }
    } else if (mode.find("crcfirst") != std::string::npos) {
      got = crc32(0, p + kHdr, bytes);
      memcpy(dest, p + kHdr, bytes);
    } else {
      for (size_t o = 0; o < bytes; o += kChunk) {
        size_t n = std::min(kChunk, bytes - o);
        memcpy(dest + o, p + kHdr + o, n);
        got = crc32(got, dest + o, n);
      }
    }
  } else if (mode.rfind("pread", 0) == 0) {
    int threads = mode == "pread2" ? 2 : 1;
    size_t chunk = kChunk;
    if (const char* c = getenv("CHUNK")) chunk = atol(c);
    size_t nchunks = (bytes + chunk - 1) / chunk;
    std::vector<uint32_t> crcs(nchunks);
    auto work = [&](int t) {
      for (size_t k = t; k < nchunks; k += threads) {
        size_t o = k * chunk, n = std::min(chunk, bytes - o);
        size_t done = 0;
        while (done < n) {
          ssize_t r = pread(fd, dest + o + done, n - done, kHdr + o + done);
          if (r <= 0) abort();
          done += r;
        }
        crcs[k] = crc32(0, dest + o, n);
      }
    };
    std::vector<std::thread> ts;
    for (int t = 1; t < threads; ++t) ts.emplace_back(work, t);
    work(0);
    for (auto& th : ts) th.join();
    for (size_t k = 0; k < nchunks; ++k) {
      size_t n = std::min(chunk, bytes - k * chunk);
      got = k == 0 ? crcs[0] : crc32_combine(got, crcs[k], n);
    }
  }
  double t = now() - t0;
  printf("%-28s %7.1f ms  memcpy %6.1f ms  ratio %.2f  crc %s\n", mode.c_str(), t * 1e3, m * 1e3,
         t / m, got == want ? "ok" : "BAD");
}
