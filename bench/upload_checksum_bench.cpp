// What an upload's checksum costs the uploader, per GiB: the Content-MD5 (OpenSSL's MD5, what
// S3Options::content_md5 sends) against the CRC-32C (ISA-L's, what S3Options::crc32c sends to a
// store that checks it), over the same buffer, best of N. Prints each one's seconds per GiB and
// their ratio (MD5 / CRC-32C), the baseline being the MD5 of this run.
//
//   upload_checksum_bench [--mib 256] [--repeat 5]

#include "bench_common.h"

#include <isa-l/crc.h>
#include <openssl/evp.h>

#include <algorithm>
#include <cstdio>
#include <stdexcept>
#include <string>

int main(int argc, char** argv) {
  CLI::App app("the upload checksums' cost: MD5 against CRC-32C");
  int mib = 256;
  int repeat = 5;
  app.add_option("--mib", mib, "bytes checksummed per run, in MiB");
  app.add_option("--repeat", repeat, "runs of each; the best is kept");
  bench::parse_or_exit(app, argc, argv);

  std::string buffer(static_cast<std::size_t>(mib) << 20, '\0');
  for (std::size_t i = 0; i < buffer.size(); ++i) {
    buffer[i] = static_cast<char>((i * 2654435761u) >> 13);
  }
  volatile unsigned sink = 0;
  const double md5 = bench::best_seconds(
      repeat, [] {},
      [&] {
        unsigned char digest[EVP_MAX_MD_SIZE];
        unsigned int size = 0;
        if (EVP_Digest(buffer.data(), buffer.size(), digest, &size, EVP_md5(), nullptr) != 1) {
          throw std::runtime_error("MD5 failed");
        }
        sink = sink + digest[0];
      });
  const double crc = bench::best_seconds(
      repeat, [] {},
      [&] {
        unsigned int running = 0xFFFFFFFFu;
        for (std::size_t at = 0; at < buffer.size(); at += std::size_t{1} << 30) {
          const std::size_t n = std::min(buffer.size() - at, std::size_t{1} << 30);
          running = crc32_iscsi(reinterpret_cast<unsigned char*>(buffer.data() + at),
                                static_cast<int>(n), running);
        }
        sink = sink + running;
      });
  const double gib = static_cast<double>(buffer.size()) / (1 << 30);
  std::printf("checksum of %d MiB, best of %d\n", mib, repeat);
  std::printf("  Content-MD5 (OpenSSL)  %.3f s/GiB  (%.0f MiB/s)\n", md5 / gib, mib / md5);
  std::printf("  CRC-32C (ISA-L)        %.3f s/GiB  (%.0f MiB/s)\n", crc / gib, mib / crc);
  std::printf("  MD5 / CRC-32C          %.1fx\n", md5 / crc);
  return 0;
}
