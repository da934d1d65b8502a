#include "zstd_stream.h"

#include "crc32.h"

#include <dcpp/core/checkpoint_error.h>

#include <zstd.h>

#include <algorithm>
#include <vector>

namespace dcpp::detail {

namespace {

std::string zstd_error(std::size_t code) { return ZSTD_getErrorName(code); }

std::string human(uint64_t bytes) { return std::to_string(bytes) + " bytes"; }

// Decompresses `input` (bytes of one layer) into at most `bound` bytes. `next_input` refills it:
// it returns the next block of stored bytes, empty at the end.
template <typename NextInput>
std::string decompress_layer(NextInput next_input, uint64_t bound, const std::string& what) {
  std::unique_ptr<ZSTD_DCtx, decltype(&ZSTD_freeDCtx)> context(ZSTD_createDCtx(), ZSTD_freeDCtx);
  if (!context) throw CheckpointError(what + ": cannot allocate a zstd decompression context");
  std::string out;
  // Grown geometrically; one byte past the bound is room enough to see that it is exceeded.
  const uint64_t limit = bound + 1;
  std::size_t produced = 0;
  std::size_t last = 1;  // ZSTD_decompressStream's hint: 0 once a frame is complete
  bool any_input = false;
  for (std::string_view block = next_input(); !block.empty(); block = next_input()) {
    if (!any_input) {
      // A frame that declares its size: refused at once when too large, else sized exactly.
      const unsigned long long declared = ZSTD_getFrameContentSize(block.data(), block.size());
      if (declared != ZSTD_CONTENTSIZE_UNKNOWN && declared != ZSTD_CONTENTSIZE_ERROR) {
        if (declared > bound) {
          throw CheckpointError(what + ": the zstd frame declares " + human(declared) +
                                ", more than its bound of " + human(bound) +
                                " (what .metadata lets this item hold); refusing to decompress "
                                "it: the frame is damaged or hostile");
        }
        out.resize(static_cast<std::size_t>(declared) + 1);
      }
    }
    any_input = true;
    ZSTD_inBuffer in{block.data(), block.size(), 0};
    while (in.pos < in.size) {
      if (produced == out.size()) {
        if (out.size() >= limit) {
          throw CheckpointError(what + ": the zstd frame decompresses to more than its bound of " +
                                human(bound) +
                                " (what .metadata lets this item hold); refusing to decompress it "
                                "further: the frame is damaged or hostile");
        }
        const uint64_t grown = std::max<uint64_t>(out.size() * 2, std::size_t{1} << 16);
        out.resize(static_cast<std::size_t>(std::min<uint64_t>(grown, limit)));
      }
      ZSTD_outBuffer buffer{out.data(), out.size(), produced};
      last = ZSTD_decompressStream(context.get(), &buffer, &in);
      if (ZSTD_isError(last)) {
        throw CheckpointError(what + ": the zstd frame is corrupted (" + zstd_error(last) +
                              "); the data file is damaged, load an earlier checkpoint");
      }
      produced = buffer.pos;
    }
    // The input is consumed, but the decompressor may still hold output for a full buffer.
    while (last != 0 && produced == out.size() && out.size() < limit) {
      const uint64_t grown = std::max<uint64_t>(out.size() * 2, std::size_t{1} << 16);
      out.resize(static_cast<std::size_t>(std::min<uint64_t>(grown, limit)));
      ZSTD_outBuffer buffer{out.data(), out.size(), produced};
      ZSTD_inBuffer none{nullptr, 0, 0};
      last = ZSTD_decompressStream(context.get(), &buffer, &none);
      if (ZSTD_isError(last)) {
        throw CheckpointError(what + ": the zstd frame is corrupted (" + zstd_error(last) +
                              "); the data file is damaged, load an earlier checkpoint");
      }
      produced = buffer.pos;
    }
    if (produced > bound) {
      throw CheckpointError(what + ": the zstd frame decompresses to more than its bound of " +
                            human(bound) +
                            " (what .metadata lets this item hold); refusing to decompress it "
                            "further: the frame is damaged or hostile");
    }
  }
  if (!any_input || last != 0) {
    throw CheckpointError(what + ": the zstd frame is " +
                          (any_input ? "truncated (it ends before its last block)" : "empty") +
                          "; the data file is damaged, load an earlier checkpoint");
  }
  out.resize(produced);
  return out;
}

}  // namespace

struct ZstdSink::Context {
  std::unique_ptr<ZSTD_CCtx, decltype(&ZSTD_freeCCtx)> cctx{ZSTD_createCCtx(), ZSTD_freeCCtx};
  std::vector<char> buffer = std::vector<char>(ZSTD_CStreamOutSize());
};

ZstdSink::ZstdSink(ByteSink& out, int level) : context_(std::make_unique<Context>()), out_(out) {
  if (!context_->cctx) throw CheckpointError("cannot allocate a zstd compression context");
  if (level < ZSTD_minCLevel() || level > ZSTD_maxCLevel()) {
    throw CheckpointError("zstd compression level " + std::to_string(level) +
                          " is out of range; use 1 to " + std::to_string(ZSTD_maxCLevel()));
  }
  for (const auto& [parameter, value] : {std::pair<ZSTD_cParameter, int>{ZSTD_c_compressionLevel,
                                                                         level},
                                         {ZSTD_c_checksumFlag, 1}}) {
    const std::size_t code = ZSTD_CCtx_setParameter(context_->cctx.get(), parameter, value);
    if (ZSTD_isError(code)) {
      throw CheckpointError("cannot configure zstd compression: " + zstd_error(code));
    }
  }
}

ZstdSink::~ZstdSink() = default;

void ZstdSink::drain(int directive, const void* data, std::size_t size) {
  ZSTD_inBuffer in{data, size, 0};
  for (;;) {
    ZSTD_outBuffer buffer{context_->buffer.data(), context_->buffer.size(), 0};
    const std::size_t remaining = ZSTD_compressStream2(
        context_->cctx.get(), &buffer, &in, static_cast<ZSTD_EndDirective>(directive));
    if (ZSTD_isError(remaining)) {
      throw CheckpointError("zstd compression failed: " + zstd_error(remaining));
    }
    if (buffer.pos > 0) {
      out_.write(buffer.dst, buffer.pos);
      crc_ = crc32(crc_, buffer.dst, buffer.pos);
      stored_ += buffer.pos;
    }
    const bool done = directive == ZSTD_e_end ? remaining == 0 : in.pos == in.size;
    if (done) return;
  }
}

void ZstdSink::write(const void* data, std::size_t size) {
  drain(ZSTD_e_continue, data, size);
  uncompressed_ += size;
}

void ZstdSink::finish() { drain(ZSTD_e_end, nullptr, 0); }

bool starts_with_zstd_magic(const void* data, std::size_t size) {
  static const unsigned char kMagic[4] = {0x28, 0xb5, 0x2f, 0xfd};
  return size >= 4 && std::equal(kMagic, kMagic + 4, static_cast<const unsigned char*>(data));
}

uint64_t zstd_frame_bound(uint64_t size) {
  // ZSTD_COMPRESSBOUND, without its 32-bit guard.
  return size + (size >> 8) + (size < (128 << 10) ? (((128 << 10) - size) >> 11) : 0) + 64;
}

std::string zstd_decompress_bounded(const ByteSource& stored, int layers, uint64_t bound,
                                    uint32_t* stored_crc) {
  const std::string what = stored.describe();
  // Inner layers may be a little larger than what they decompress to.
  std::vector<uint64_t> bounds(static_cast<std::size_t>(std::max(layers, 1)), bound);
  for (std::size_t i = bounds.size() - 1; i-- > 0;) bounds[i] = zstd_frame_bound(bounds[i + 1]);
  constexpr std::size_t kBlock = std::size_t{1} << 20;
  std::string block;
  uint64_t done = 0;
  uint32_t crc = 0;
  std::string current = decompress_layer(
      [&]() -> std::string_view {
        const std::size_t n =
            static_cast<std::size_t>(std::min<uint64_t>(kBlock, stored.size() - done));
        block.resize(n);
        if (n > 0) {
          stored.read(done, block.data(), n);
          crc = crc32(crc, block.data(), n);
          done += n;
        }
        return block;
      },
      bounds[0], what);
  if (stored_crc != nullptr) *stored_crc = crc;
  for (std::size_t layer = 1; layer < bounds.size(); ++layer) {
    bool given = false;
    const std::string input = std::move(current);
    current = decompress_layer(
        [&]() -> std::string_view {
          if (given) return {};
          given = true;
          return input;
        },
        bounds[layer], what);
  }
  return current;
}

}  // namespace dcpp::detail
