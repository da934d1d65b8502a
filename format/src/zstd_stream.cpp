#include "format/zstd_stream.h"

#include "format/crc32.h"

#include <dcpp/core/checkpoint_error.h>

#include <zstd.h>

#include <algorithm>
#include <cstring>
#include <vector>

namespace dcpp::detail {

namespace {

std::string zstd_error(std::size_t code) { return ZSTD_getErrorName(code); }

std::string human(uint64_t bytes) { return std::to_string(bytes) + " bytes"; }

// Output memory, not zero-filled (every byte handed out was written by the decompressor).
class Buffer {
 public:
  char* data() { return data_.get(); }
  std::size_t capacity() const { return capacity_; }
  // Grows to `capacity`, keeping the first `used` bytes.
  void grow(std::size_t capacity, std::size_t used) {
    std::unique_ptr<char[]> grown(new char[capacity]);
    if (used > 0) std::memcpy(grown.get(), data_.get(), used);
    data_ = std::move(grown);
    capacity_ = capacity;
  }
  std::unique_ptr<char[]> release() { return std::move(data_); }

 private:
  std::unique_ptr<char[]> data_;
  std::size_t capacity_ = 0;
};

std::string too_large(const std::string& what, uint64_t bound) {
  return what + ": the zstd frame decompresses to more than its bound of " + human(bound) +
         " (what .metadata lets this item hold); refusing to decompress it further: the frame is "
         "damaged or hostile";
}

std::string corrupted(const std::string& what, std::size_t code) {
  return what + ": the zstd frame is corrupted (" + zstd_error(code) +
         "); the data file is damaged, load an earlier checkpoint";
}

// Decompresses one layer into at most `bound` bytes. `next_input` returns the next block of the
// layer's bytes, empty at the end. The output starts at `first_size` bytes (at most the bound)
// and doubles as needed; one byte past the bound is room enough to see that it is exceeded.
template <typename NextInput>
ZstdOutput decompress_layer(NextInput next_input, uint64_t bound, uint64_t first_size,
                            const std::string& what) {
  std::unique_ptr<ZSTD_DCtx, decltype(&ZSTD_freeDCtx)> context(ZSTD_createDCtx(), ZSTD_freeDCtx);
  if (!context)
    throw CheckpointError(ErrorKind::kIo, what + ": cannot allocate a zstd decompression context");
  const uint64_t limit = bound + 1;
  Buffer out;
  std::size_t produced = 0;
  std::size_t last = 1;  // ZSTD_decompressStream's hint: 0 once a frame is complete
  bool any_input = false;
  const auto grow = [&] {
    if (out.capacity() >= limit) throw CheckpointError(ErrorKind::kCorrupt, too_large(what, bound));
    const uint64_t doubled = std::max<uint64_t>(uint64_t{out.capacity()} * 2, first_size);
    out.grow(static_cast<std::size_t>(std::min<uint64_t>(std::max<uint64_t>(doubled, 1), limit)),
             produced);
  };
  for (std::string_view block = next_input(); !block.empty(); block = next_input()) {
    if (!any_input) {
      // A frame that declares its size: refused at once when too large, else sized exactly.
      const unsigned long long declared = ZSTD_getFrameContentSize(block.data(), block.size());
      if (declared != ZSTD_CONTENTSIZE_UNKNOWN && declared != ZSTD_CONTENTSIZE_ERROR) {
        if (declared > bound) {
          throw CheckpointError(ErrorKind::kCorrupt,
                                what + ": the zstd frame declares " + human(declared) +
                                    ", more than its bound of " + human(bound) +
                                    " (what .metadata lets this item hold); refusing to decompress "
                                    "it: the frame is damaged or hostile");
        }
        first_size = declared + 1;
      }
    }
    any_input = true;
    ZSTD_inBuffer in{block.data(), block.size(), 0};
    while (in.pos < in.size) {
      if (produced == out.capacity()) grow();
      ZSTD_outBuffer buffer{out.data(), out.capacity(), produced};
      last = ZSTD_decompressStream(context.get(), &buffer, &in);
      if (ZSTD_isError(last)) throw CheckpointError(ErrorKind::kCorrupt, corrupted(what, last));
      produced = buffer.pos;
    }
    // The input is consumed, but the decompressor may still hold output for a full buffer.
    while (last != 0 && produced == out.capacity()) {
      grow();
      ZSTD_outBuffer buffer{out.data(), out.capacity(), produced};
      ZSTD_inBuffer none{nullptr, 0, 0};
      last = ZSTD_decompressStream(context.get(), &buffer, &none);
      if (ZSTD_isError(last)) throw CheckpointError(ErrorKind::kCorrupt, corrupted(what, last));
      produced = buffer.pos;
    }
    if (produced > bound) throw CheckpointError(ErrorKind::kCorrupt, too_large(what, bound));
  }
  if (!any_input || last != 0) {
    throw CheckpointError(ErrorKind::kCorrupt,
                          what + ": the zstd frame is " +
                              (any_input ? "truncated (it ends before its last block)" : "empty") +
                              "; the data file is damaged, load an earlier checkpoint");
  }
  return ZstdOutput{out.release(), produced};
}

}  // namespace

struct ZstdSink::Context {
  std::unique_ptr<ZSTD_CCtx, decltype(&ZSTD_freeCCtx)> cctx{ZSTD_createCCtx(), ZSTD_freeCCtx};
  std::vector<char> buffer = std::vector<char>(ZSTD_CStreamOutSize());
};

ZstdSink::ZstdSink(ByteSink& out, int level) : context_(std::make_unique<Context>()), out_(out) {
  if (!context_->cctx)
    throw CheckpointError(ErrorKind::kIo, "cannot allocate a zstd compression context");
  if (level < ZSTD_minCLevel() || level > ZSTD_maxCLevel()) {
    throw CheckpointError(ErrorKind::kUsage, "zstd compression level " + std::to_string(level) +
                                                 " is out of range; use 1 to " +
                                                 std::to_string(ZSTD_maxCLevel()));
  }
  for (const auto& [parameter, value] :
       {std::pair<ZSTD_cParameter, int>{ZSTD_c_compressionLevel, level},
        {ZSTD_c_checksumFlag, 1}}) {
    const std::size_t code = ZSTD_CCtx_setParameter(context_->cctx.get(), parameter, value);
    if (ZSTD_isError(code)) {
      throw CheckpointError(ErrorKind::kUsage,
                            "cannot configure zstd compression: " + zstd_error(code));
    }
  }
}

ZstdSink::~ZstdSink() = default;

void ZstdSink::drain(int directive, const void* data, std::size_t size) {
  ZSTD_inBuffer in{data, size, 0};
  for (;;) {
    ZSTD_outBuffer buffer{context_->buffer.data(), context_->buffer.size(), 0};
    const std::size_t remaining = ZSTD_compressStream2(context_->cctx.get(), &buffer, &in,
                                                       static_cast<ZSTD_EndDirective>(directive));
    if (ZSTD_isError(remaining)) {
      throw CheckpointError(ErrorKind::kIo, "zstd compression failed: " + zstd_error(remaining));
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

ZstdOutput zstd_decompress_bounded(const ByteSource& stored, int layers, uint64_t bound,
                                   uint32_t* stored_crc) {
  const std::string what = stored.describe();
  // Inner layers may be a little larger than what they decompress to.
  std::vector<uint64_t> bounds(static_cast<std::size_t>(std::max(layers, 1)), bound);
  for (std::size_t i = bounds.size() - 1; i-- > 0;) bounds[i] = zstd_frame_bound(bounds[i + 1]);
  // The first guess at the output's size: the bound when data compresses up to 32 times, as model
  // state does (1 MiB at least); compressing better (zeros), it doubles from there.
  const auto first_size = [](uint64_t layer_bound, uint64_t input) {
    return std::min<uint64_t>(layer_bound + 1, std::max<uint64_t>(uint64_t{1} << 20, input * 32));
  };
  constexpr std::size_t kBlock = std::size_t{1} << 20;
  std::string block;
  uint64_t done = 0;
  uint32_t crc = 0;
  ZstdOutput current = decompress_layer(
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
      bounds[0], first_size(bounds[0], stored.size()), what);
  if (stored_crc != nullptr) *stored_crc = crc;
  for (std::size_t layer = 1; layer < bounds.size(); ++layer) {
    bool given = false;
    const ZstdOutput input = std::move(current);
    current = decompress_layer(
        [&]() -> std::string_view {
          if (given) return {};
          given = true;
          return input.view();
        },
        bounds[layer], first_size(bounds[layer], input.size), what);
  }
  return current;
}

}  // namespace dcpp::detail
