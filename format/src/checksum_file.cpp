// The checksum file's codec (format in checksum_file.h). Decoding trusts nothing: every field is
// parsed strictly, and the closing CRC-32 must match before anything is used.

#include "format/checksum_file.h"

#include "core/huge_pages.h"
#include "format/crc32.h"
#include "format/file_io.h"

#include <dcpp/core/checkpoint_error.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cstdio>
#include <memory>

namespace dcpp::detail {

namespace {

constexpr std::string_view kMagic = "dcpp-checksums 1";

std::string hex32(uint32_t value) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "%08x", value);
  return buf;
}

// Names may hold any byte: the field and line separators, '%' and other control bytes are
// written as %XX. Appended to `out`.
void append_escaped(std::string& out, std::string_view text) {
  std::size_t plain = 0;  // where the run of bytes written as they are began
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto u = static_cast<unsigned char>(text[i]);
    if (u < 0x20 || u == 0x7f || u == '%') {
      out.append(text.data() + plain, i - plain);
      char buf[4];
      std::snprintf(buf, sizeof(buf), "%%%02x", u);
      out.append(buf, 3);
      plain = i + 1;
    }
  }
  out.append(text.data() + plain, text.size() - plain);
}

void append_number(std::string& out, uint64_t value) {
  char buf[24];
  const auto [end, error] = std::to_chars(buf, buf + sizeof buf, value);
  out.append(buf, end);
}

void append_hex32(std::string& out, uint32_t value) {
  static constexpr char kDigits[] = "0123456789abcdef";
  char digits[8];
  for (int i = 0; i < 8; ++i) digits[i] = kDigits[(value >> (28 - 4 * i)) & 0xf];
  out.append(digits, 8);
}

class Parser {
 public:
  Parser(std::string_view bytes, const std::string& path, const ItemChecksumFilter& keep)
      : bytes_(bytes), path_(path), keep_(keep) {}

  std::vector<SaveChecksums> run() {
    // The last line holds the CRC-32 of everything before it.
    if (bytes_.empty() || bytes_.back() != '\n') fail("it does not end with a complete line");
    const std::size_t last = bytes_.rfind('\n', bytes_.size() - 2);
    const std::size_t end_line = last == std::string_view::npos ? 0 : last + 1;
    const Fields end = fields(bytes_.substr(end_line, bytes_.size() - 1 - end_line));
    if (end.size() != 2 || end[0] != "end") fail("its last line is not the closing 'end' line");
    const uint32_t expected = parse_crc(end[1]);
    const uint32_t actual = crc32(0, bytes_.data(), end_line);
    if (actual != expected) {
      fail("its CRC-32 is " + hex32(actual) + " but its 'end' line records " + hex32(expected));
    }

    std::string_view body = bytes_.substr(0, end_line);
    if (next_line(body) != kMagic) fail("it does not start with '" + std::string(kMagic) + "'");
    std::vector<SaveChecksums> saves;
    while (!body.empty()) {
      const Fields f = fields(next_line(body));
      if (f.size() != 4 || f[0] != "metadata") fail("expected a 'metadata' line");
      SaveChecksums save;
      save.metadata_size = parse_u64(f[1]);
      save.metadata_crc32 = parse_crc(f[2]);
      if (f[3] != "-") {
        const uint64_t count = parse_u64(f[3]);
        save.items.emplace();
        for (uint64_t i = 0; i < count; ++i) {
          if (body.empty()) fail("fewer item lines than its 'metadata' line counts");
          const Fields g = fields(next_line(body));
          if (g.size() != 6 || g[0] != "item") fail("expected an 'item' line");
          ItemChecksum item;
          item.offset = parse_u64(g[2]);
          item.length = parse_u64(g[3]);
          item.crc32 = parse_crc(g[4]);
          if (keep_) {
            const bool escaped = g[1].find('%') != std::string_view::npos;
            if (!keep_(escaped ? std::string_view(item.file = unescape(g[1])) : g[1],
                       item.offset)) {
              continue;
            }
          }
          item.file = unescape(g[1]);
          item.key = unescape(g[5]);
          save.items->push_back(std::move(item));
        }
      }
      saves.push_back(std::move(save));
    }
    if (saves.empty()) fail("it has no 'metadata' line");
    return saves;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw CheckpointError(
        ErrorKind::kCorrupt,
        "checksum file " + path_ + " is damaged: " + what +
            "; restore it, or delete it to load with the format's own checks only");
  }

  std::string_view next_line(std::string_view& body) {
    const std::size_t end = body.find('\n');
    if (end == std::string_view::npos) fail("a line is not terminated");
    const std::string_view line = body.substr(0, end);
    body.remove_prefix(end + 1);
    return line;
  }

  /// A line's tab-separated fields: the first six, and how many there are (no allocation: a
  /// checksum file of a large save has a million lines).
  struct Fields {
    std::array<std::string_view, 6> field;
    std::size_t count = 0;
    std::size_t size() const { return count; }
    std::string_view operator[](std::size_t i) const { return field[i]; }
  };

  static Fields fields(std::string_view line) {
    Fields out;
    for (;;) {
      const std::size_t tab = line.find('\t');
      if (out.count < out.field.size()) out.field[out.count] = line.substr(0, tab);
      ++out.count;
      if (tab == std::string_view::npos) return out;
      line.remove_prefix(tab + 1);
    }
  }

  uint64_t parse_u64(std::string_view text) const {
    if (text.empty() || text.size() > 19 || (text.size() > 1 && text[0] == '0')) {
      fail("'" + std::string(text) + "' is not a number");
    }
    uint64_t value = 0;
    for (const char c : text) {
      if (c < '0' || c > '9') fail("'" + std::string(text) + "' is not a number");
      value = value * 10 + static_cast<uint64_t>(c - '0');
    }
    return value;
  }

  uint32_t parse_crc(std::string_view text) const {
    if (text.size() != 8) fail("'" + std::string(text) + "' is not a CRC-32");
    uint32_t value = 0;
    for (const char c : text) {
      const int digit = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
      if (digit < 0) fail("'" + std::string(text) + "' is not a CRC-32");
      value = value << 4 | static_cast<uint32_t>(digit);
    }
    return value;
  }

  std::string unescape(std::string_view text) const {
    std::string out;
    out.reserve(text.size());
    for (std::size_t i = 0; i < text.size(); ++i) {
      if (text[i] != '%') {
        out += text[i];
        continue;
      }
      if (i + 2 >= text.size()) fail("a name has a truncated %-escape");
      const std::string hex(text.substr(i + 1, 2));
      char* end = nullptr;
      const long value = std::strtol(hex.c_str(), &end, 16);
      if (end != hex.c_str() + 2) fail("a name has an invalid %-escape");
      out += static_cast<char>(value);
      i += 2;
    }
    return out;
  }

  std::string_view bytes_;
  const std::string& path_;
  const ItemChecksumFilter& keep_;
};

}  // namespace

// Appended in place: at 1,024 ranks a save lists a million items, and a temporary string per
// field, or the output's doublings, would be most of the cost.
ChecksumFileEncoder::ChecksumFileEncoder(std::size_t expected_bytes) {
  out_.reserve(kMagic.size() + 1 + expected_bytes + 16);
  advise_huge_pages(out_.data(), out_.capacity());
  out_ += kMagic;
  out_ += '\n';
}

void ChecksumFileEncoder::save(uint64_t metadata_size, uint32_t metadata_crc32,
                               std::optional<uint64_t> items) {
  out_ += "metadata\t";
  append_number(out_, metadata_size);
  out_ += '\t';
  append_hex32(out_, metadata_crc32);
  out_ += '\t';
  if (items) {
    append_number(out_, *items);
  } else {
    out_ += '-';
  }
  out_ += '\n';
}

void ChecksumFileEncoder::item(std::string_view file, uint64_t offset, uint64_t length,
                               uint32_t crc32, std::string_view key) {
  out_ += "item\t";
  append_escaped(out_, file);
  out_ += '\t';
  append_number(out_, offset);
  out_ += '\t';
  append_number(out_, length);
  out_ += '\t';
  append_hex32(out_, crc32);
  out_ += '\t';
  append_escaped(out_, key);
  out_ += '\n';
}

std::string ChecksumFileEncoder::finish() {
  const uint32_t crc = crc32(0, out_.data(), out_.size());  // of every line before the last
  out_ += "end\t";
  append_hex32(out_, crc);
  out_ += '\n';
  return std::move(out_);
}

std::string encode_checksum_file(const std::vector<SaveChecksums>& saves) {
  std::size_t expected = 0;
  for (const SaveChecksums& save : saves) {
    expected += 64;
    if (!save.items) continue;
    for (const ItemChecksum& item : *save.items) {
      expected += ChecksumFileEncoder::item_bytes(item.file.size(), item.key.size());
    }
  }
  ChecksumFileEncoder encoder(expected);
  for (const SaveChecksums& save : saves) {
    encoder.save(save.metadata_size, save.metadata_crc32,
                 save.items ? std::optional<uint64_t>(save.items->size()) : std::nullopt);
    if (!save.items) continue;
    for (const ItemChecksum& item : *save.items) {
      encoder.item(item.file, item.offset, item.length, item.crc32, item.key);
    }
  }
  return encoder.finish();
}

std::vector<SaveChecksums> decode_checksum_file(std::string_view bytes, const std::string& path,
                                                const ItemChecksumFilter& keep) {
  return Parser(bytes, path, keep).run();
}

const SaveChecksums* find_save(const std::vector<SaveChecksums>& saves,
                               std::string_view metadata_bytes) {
  const uint32_t crc = crc32(0, metadata_bytes.data(), metadata_bytes.size());
  for (const SaveChecksums& save : saves) {
    if (save.metadata_size == metadata_bytes.size() && save.metadata_crc32 == crc) return &save;
  }
  return nullptr;
}

std::string metadata_mismatch_message(const std::vector<SaveChecksums>& saves,
                                      std::string_view metadata_bytes,
                                      const std::string& metadata_path,
                                      const std::string& checksum_path) {
  const SaveChecksums& save = saves.front();  // the latest save
  const uint64_t size = metadata_bytes.size();
  std::string how;
  if (size < save.metadata_size) {
    how = "it is " + std::to_string(size) + " bytes, the checksum file records " +
          std::to_string(save.metadata_size) + ": truncated at byte " + std::to_string(size);
  } else if (size > save.metadata_size) {
    how = "it is " + std::to_string(size) + " bytes, the checksum file records " +
          std::to_string(save.metadata_size) + ": bytes were added from byte " +
          std::to_string(save.metadata_size);
  } else {
    how = "its CRC-32 is " + hex32(crc32(0, metadata_bytes.data(), size)) +
          ", the checksum file records " + hex32(save.metadata_crc32) + ": some of its " +
          std::to_string(size) + " bytes changed";
  }
  return metadata_path + " is damaged (" + how + ", per " + checksum_path +
         "); restore it or load an earlier checkpoint (if a program that does not write "
         "checksum files saved over this checkpoint, delete " +
         checksum_path + ")";
}

std::optional<SaveChecksums> check_metadata_checksum(const std::filesystem::path& directory,
                                                     std::string_view metadata_bytes) {
  return check_metadata_checksum(directory, metadata_bytes, ".metadata", kChecksumFileName);
}

std::optional<SaveChecksums> check_metadata_checksum(const std::filesystem::path& directory,
                                                     std::string_view metadata_bytes,
                                                     const ItemChecksumFilter& keep) {
  return check_metadata_checksum(directory, metadata_bytes, ".metadata", kChecksumFileName, keep);
}

std::optional<SaveChecksums> check_metadata_checksum(const std::filesystem::path& directory,
                                                     std::string_view metadata_bytes,
                                                     const std::string& metadata_name,
                                                     const std::string& checksum_name,
                                                     const ItemChecksumFilter& keep) {
  const std::filesystem::path path = directory / checksum_name;
  std::error_code error;
  if (!std::filesystem::exists(path, error)) return std::nullopt;
  const File file(path, File::Mode::kRead);
  const std::size_t size = file.size();  // a million items' lines at 1,024 ranks: see huge_pages.h
  const std::unique_ptr<char[]> buffer(new char[std::max<std::size_t>(size, 1)]);
  advise_huge_pages(buffer.get(), size);
  file.read_exactly(0, buffer.get(), size);
  const std::vector<SaveChecksums> saves =
      decode_checksum_file(std::string_view(buffer.get(), size), path.string(), keep);
  const SaveChecksums* save = find_save(saves, metadata_bytes);
  if (save == nullptr) {
    throw CheckpointError(
        ErrorKind::kCorrupt,
        metadata_mismatch_message(saves, metadata_bytes, (directory / metadata_name).string(),
                                  path.string()));
  }
  return *save;
}

ItemChecksumIndex::ItemChecksumIndex(const std::vector<ItemChecksum>& items) {
  for (const ItemChecksum& item : items) {
    by_file_[item.file].emplace(item.offset, item);
  }
}

const ItemChecksum* ItemChecksumIndex::find(const std::string& file, uint64_t offset) const {
  const auto in_file = by_file_.find(file);
  if (in_file == by_file_.end()) return nullptr;
  const auto item = in_file->second.find(offset);
  return item == in_file->second.end() ? nullptr : &item->second;
}

std::string item_mismatch_message(const std::string& where, const ItemChecksum& expected,
                                  uint32_t actual) {
  return where + ": the item's bytes [" + std::to_string(expected.offset) + ", " +
         std::to_string(expected.offset + expected.length) + ") have CRC-32 " + hex32(actual) +
         ", but the checksum file records " + hex32(expected.crc32) +
         "; the data is corrupted: restore the file or load an earlier checkpoint";
}

}  // namespace dcpp::detail
