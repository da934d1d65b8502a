#include "format/pickle/pickle_writer.h"

#include "core/huge_pages.h"

#include <dcpp/core/checkpoint_error.h>

#include <cstring>

namespace dcpp::detail {

namespace {

constexpr std::size_t kFrameSizeMin = 4;

}  // namespace

PickleWriter::PickleWriter(int protocol) : protocol_(protocol) {
  if (protocol != 2 && protocol != 4) {
    throw CheckpointError(ErrorKind::kUsage,
                          "dcpp writes pickle protocols 2 and 4, not " + std::to_string(protocol));
  }
  out_.push_back(static_cast<char>(op::kProto));
  out_.push_back(static_cast<char>(protocol));
  frame_start_ = kNoFrame;
}

void PickleWriter::raw_u64(uint64_t value) {
  unsigned char bytes[8];
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<unsigned char>(value >> (8 * i));
  raw(bytes, 8);
}

void PickleWriter::throw_finished() const {
  throw CheckpointError(ErrorKind::kUsage, "PickleWriter used after finish()");
}

void PickleWriter::open_frame() {
  frame_start_ = out_.size();
  out_.append(kFrameHeaderSize, '\0');
}

void PickleWriter::commit_frame() {
  if (protocol_ < 4 || frame_start_ == kNoFrame) {
    return;
  }
  const std::size_t length = out_.size() - frame_start_ - kFrameHeaderSize;
  if (length >= kFrameSizeMin) {
    out_[frame_start_] = static_cast<char>(op::kFrame);
    for (int i = 0; i < 8; ++i) {
      out_[frame_start_ + 1 + i] = static_cast<char>(static_cast<uint64_t>(length) >> (8 * i));
    }
  } else {
    out_.erase(frame_start_, kFrameHeaderSize);
  }
  frame_start_ = kNoFrame;
}

void PickleWriter::put_none() {
  boundary();
  op(op::kNone);
}

void PickleWriter::put_bool(bool value) {
  boundary();
  op(value ? op::kNewTrue : op::kNewFalse);
}

void PickleWriter::put_long(std::string_view bytes) {
  boundary();
  if (bytes.size() < 256) {
    op(op::kLong1);
    out_.push_back(static_cast<char>(bytes.size()));
  } else {
    op(op::kLong4);
    raw_u32(static_cast<uint32_t>(bytes.size()));
  }
  out_.append(bytes);
}

void PickleWriter::put_wide_int(int64_t value) {
  if (value >= INT32_MIN && value <= INT32_MAX) {
    op(op::kBinInt);
    raw_u32(static_cast<uint32_t>(static_cast<int32_t>(value)));
  } else {
    // LONG1: the shortest little-endian two's complement encoding, as Python's encode_long.
    unsigned char bytes[8];
    const auto bits = static_cast<uint64_t>(value);
    for (int i = 0; i < 8; ++i) bytes[i] = static_cast<unsigned char>(bits >> (8 * i));
    int n = 8;
    while (n > 1) {
      const unsigned char top = bytes[n - 1];
      const bool next_negative = (bytes[n - 2] & 0x80) != 0;
      if ((top == 0x00 && !next_negative) || (top == 0xff && next_negative)) {
        --n;
      } else {
        break;
      }
    }
    op(op::kLong1);
    out_.push_back(static_cast<char>(n));
    raw(bytes, static_cast<std::size_t>(n));
  }
}

void PickleWriter::put_float(double value) {
  boundary();
  op(op::kBinFloat);
  uint64_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  unsigned char bytes[8];
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<unsigned char>(bits >> (8 * (7 - i)));
  raw(bytes, 8);
}

void PickleWriter::string_op(std::string_view value) {
  const uint64_t size = value.size();
  if (protocol_ >= 4 && size < 256) {
    op(op::kShortBinUnicode);
    out_.push_back(static_cast<char>(size));
  } else if (size <= 0xffffffffu) {
    op(op::kBinUnicode);
    raw_u32(static_cast<uint32_t>(size));
  } else if (protocol_ >= 4) {
    op(op::kBinUnicode8);
    raw_u64(size);
  } else {
    throw CheckpointError(ErrorKind::kUsage, "a string of " + std::to_string(size) +
                                                 " bytes does not fit in a protocol 2 pickle");
  }
  raw(value.data(), value.size());
}

void PickleWriter::put_str(std::string_view value) {
  boundary();
  string_op(value);
  memoize();
}

uint32_t PickleWriter::put_shared_str(std::string_view value) {
  key_scratch_.assign("s:").append(value);
  if (const std::optional<uint32_t> memo = put_memo_of(key_scratch_)) {
    return *memo;
  }
  boundary();
  string_op(value);
  return remember_shared(key_scratch_);
}

uint32_t PickleWriter::put_global(std::string_view module, std::string_view name) {
  // A pickle names few distinct globals, each many times: a short list beats hashing.
  for (const SharedGlobal& global : globals_) {
    if (global.module == module && global.name == name) {
      put_memo(global.memo_index);
      return global.memo_index;
    }
  }
  boundary();
  if (protocol_ >= 4) {
    put_shared_str(module);
    put_shared_str(name);
    op(op::kStackGlobal);
  } else {
    op(op::kGlobal);
    raw(module.data(), module.size());
    out_.push_back('\n');
    raw(name.data(), name.size());
    out_.push_back('\n');
  }
  globals_.push_back({std::string(module), std::string(name), memoize()});
  return globals_.back().memo_index;
}

bool PickleWriter::put_shared(std::string_view key) {
  key_scratch_.assign(key.data(), key.size());
  return put_memo_of(key_scratch_).has_value();
}

std::optional<uint32_t> PickleWriter::put_memo_of(const std::string& key) {
  const auto it = shared_.find(key);
  if (it == shared_.end()) {
    return std::nullopt;
  }
  put_memo(it->second);
  return it->second;
}

uint32_t PickleWriter::remember_shared(std::string_view key, int64_t memoized_index) {
  const uint32_t index = memoized_index < 0 ? memoize() : static_cast<uint32_t>(memoized_index);
  shared_.emplace(std::string(key), index);
  return index;
}

void PickleWriter::mark() {
  boundary();
  op(op::kMark);
}

void PickleWriter::binpersid() { op(op::kBinPersId); }

void PickleWriter::reserve(std::size_t bytes) {
  out_.reserve(bytes);
  advise_huge_pages(out_.data(), out_.capacity());
}

std::string PickleWriter::finish() {
  op(op::kStop);
  commit_frame();
  finished_ = true;
  return std::move(out_);
}

}  // namespace dcpp::detail
