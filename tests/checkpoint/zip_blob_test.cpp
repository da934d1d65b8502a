// The zip codec of data items: byte-identical to PyTorch 2.6's torch.save, zip64, hostile input.

#include "dcpp_test.h"

#include "format/crc32.h"
#include "format/zip/zip_blob_reader.h"
#include "format/zip/zip_blob_writer.h"

#include <dcpp/core/checkpoint_error.h>

#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace dcpp::detail {
using dcpp::test::read_file;
using dcpp::test::write_file;

namespace {

/// The archives concatenated in a data file: each ends with its end record (no comments), so
/// scan for PK\5\6 and keep the candidate that parses.
std::vector<std::string_view> split_archives(std::string_view file) {
  std::vector<std::string_view> out;
  std::size_t start = 0;
  std::size_t from = 0;
  while (start < file.size()) {
    const std::size_t sig = file.find(std::string_view("PK\x05\x06", 4), from);
    REQUIRE(sig != std::string_view::npos);
    REQUIRE(sig + 22 <= file.size());
    const std::string_view candidate = file.substr(start, sig + 22 - start);
    MemorySource source(candidate, "candidate");
    try {
      ZipBlobReader reader(source);
      out.push_back(candidate);
      start = from = sig + 22;
    } catch (const CheckpointError&) {
      from = sig + 1;  // the signature bytes happened to be in a payload
    }
  }
  return out;
}

std::string bytes_of(std::initializer_list<int> values) {
  std::string out;
  for (int v : values) {
    out.push_back(static_cast<char>(v));
  }
  return out;
}

uint32_t le32(std::string_view s, std::size_t at) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) {
    v = (v << 8) | static_cast<uint8_t>(s[at + i]);
  }
  return v;
}

/// Anything parsed must be self-consistent: every payload inside the source, readable, and a CRC
/// check either passes or throws CheckpointError.
void check_consistent(const ZipBlobReader& reader, const ByteSource& source) {
  for (const ZipRecordInfo& r : reader.records()) {
    REQUIRE(r.data_offset <= source.size());
    REQUIRE(r.size <= source.size() - r.data_offset);
    REQUIRE(reader.find(r.name) == &r);
    std::string payload = reader.read_string(r, /*verify_crc=*/false);
    REQUIRE(payload.size() == r.size);
    try {
      reader.read_string(r, /*verify_crc=*/true);
    } catch (const CheckpointError&) {
    }
  }
}

TEST_CASE("crc32 matches zip's CRC-32 and continues across calls", "[zip]") {
  const std::string check = "123456789";
  CHECK(crc32(0, check.data(), check.size()) == 0xCBF43926u);
  CHECK(crc32(0, nullptr, 0) == 0u);
  const uint32_t part = crc32(0, check.data(), 4);
  CHECK(crc32(part, check.data() + 4, 5) == 0xCBF43926u);
}

TEST_CASE("re-writing every PyTorch 2.6 archive gives identical bytes", "[zip][interop]") {
  const std::vector<std::string> files = {
      "single_rank_mixed/__0_0.distcp", "model_optim_adam/__0_0.distcp",
      "two_rank_sharded/__0_0.distcp", "two_rank_sharded/__1_0.distcp", "torch_save_state_dict.pt"};
  std::size_t archives = 0;
  for (const std::string& name : files) {
    INFO(name);
    const std::string file = read_file(dcpp::test::fixture(name));
    const std::vector<std::string_view> parts = split_archives(file);
    REQUIRE(!parts.empty());
    std::size_t total = 0;
    for (std::string_view archive : parts) {
      total += archive.size();
      MemorySource source(archive, name);
      ZipBlobReader reader(source);
      CHECK(reader.root() ==
            (name == "torch_save_state_dict.pt" ? "torch_save_state_dict" : "archive"));
      CHECK(reader.find("byteorder") != nullptr);
      CHECK(reader.read_string(reader.get("byteorder"), true) == "little");
      CHECK(reader.read_string(reader.get("version"), true) == "3\n");
      MemorySink sink;
      ZipBlobWriter writer(sink, reader.root());
      for (const ZipRecordInfo& r : reader.records()) {
        CHECK(r.data_offset % 64 == 0);
        const std::string payload = reader.read_string(r, /*verify_crc=*/true);
        writer.add(r.name, payload.data(), payload.size());
      }
      CHECK(writer.finish() == archive.size());
      REQUIRE(sink.buffer().size() == archive.size());
      CHECK(sink.buffer() == archive);
      ++archives;
    }
    CHECK(total == file.size());
  }
  CHECK(archives == 18 + 29 + 2 + 5 + 1);
}

TEST_CASE("zip round trips: empty, one byte, many records, alignment", "[zip]") {
  std::mt19937_64 rng(7);
  std::vector<std::pair<std::string, std::string>> records = {
      {"empty", ""}, {"one", "x"}, {"data.pkl", "pickle bytes"}};
  for (int i = 0; i < 300; ++i) {
    std::string payload(rng() % 700, '\0');
    for (char& c : payload) {
      c = static_cast<char>(rng());
    }
    records.emplace_back("data/" + std::to_string(i), std::move(payload));
  }
  const std::size_t lead = GENERATE(0, 1, 37, 64, 1000);
  MemorySink sink;
  sink.write(std::string(lead, '#').data(), lead);
  ZipBlobWriter writer(sink, "archive");
  for (const auto& [name, payload] : records) {
    writer.add(name, payload.data(), payload.size());
  }
  const uint64_t size = writer.finish();
  REQUIRE(sink.buffer().size() == lead + size);

  const std::string_view archive = std::string_view(sink.buffer()).substr(lead);
  MemorySource source(archive, "round trip");
  ZipBlobReader reader(source);
  CHECK(reader.root() == "archive");
  REQUIRE(reader.records().size() == records.size());
  for (std::size_t i = 0; i < records.size(); ++i) {
    const ZipRecordInfo& r = reader.records()[i];
    CHECK(r.name == records[i].first);
    CHECK(r.data_offset % 64 == 0);
    CHECK(r.size == records[i].second.size());
    CHECK(reader.read_string(r, true) == records[i].second);
    CHECK(reader.find(records[i].first) == &r);
  }
  CHECK(reader.find("missing") == nullptr);
  CHECK(reader.find("archive/data.pkl") == nullptr);
  CHECK_THROWS_AS(reader.get("missing"), CheckpointError);

  // An empty record has flags 0x0800 and no data descriptor, as miniz writes it.
  const ZipRecordInfo& empty = reader.get("empty");
  CHECK(archive.substr(6, 2) == bytes_of({0x00, 0x08}));
  CHECK(archive.substr(empty.data_offset, 4) == bytes_of({'P', 'K', 3, 4}));
}

TEST_CASE("read_range reads inside a record and rejects ranges outside it", "[zip]") {
  MemorySink sink;
  ZipBlobWriter writer(sink);
  const std::string payload = "0123456789";
  writer.add("data/0", payload.data(), payload.size());
  writer.finish();
  MemorySource source(sink.buffer(), "range");
  ZipBlobReader reader(source);
  const ZipRecordInfo& r = reader.get("data/0");
  char buf[4] = {};
  reader.read_range(r, 6, buf, 4);
  CHECK(std::string(buf, 4) == "6789");
  reader.read_range(r, 10, buf, 0);
  CHECK_THROWS_AS(reader.read_range(r, 7, buf, 4), CheckpointError);
  CHECK_THROWS_AS(reader.read_range(r, 11, buf, 0), CheckpointError);
  CHECK_THROWS_AS(reader.read_range(r, ~uint64_t{0}, buf, 2), CheckpointError);
  ZipRecordInfo forged = r;
  forged.size = ~uint64_t{0} - 3;
  CHECK_THROWS_AS(reader.read_string(forged, false), CheckpointError);
}

/// Counts what is read through it.
class CountingSource final : public ByteSource {
 public:
  explicit CountingSource(const ByteSource& inner) : inner_(inner) {}
  uint64_t size() const override { return inner_.size(); }
  std::string describe() const override { return inner_.describe(); }
  void read(uint64_t offset, void* dst, std::size_t n) const override {
    ++reads;
    bytes += n;
    inner_.read(offset, dst, n);
  }
  mutable std::size_t reads = 0;
  mutable uint64_t bytes = 0;

 private:
  const ByteSource& inner_;
};

TEST_CASE("parsing reads the tail and headers, not the payloads", "[zip]") {
  const std::string big(8 << 20, 'b');
  MemorySink sink;
  ZipBlobWriter writer(sink);
  writer.add("data.pkl", "p", 1);
  writer.add("data/0", big.data(), big.size());
  writer.add("data/1", big.data(), big.size());
  writer.add("version", "3\n", 2);
  writer.finish();
  MemorySource memory(sink.buffer(), "big");
  CountingSource counting(memory);
  ZipBlobReader reader(counting);
  CHECK(counting.bytes < 70000);
  CHECK(counting.reads == 4);  // the tail (directory, last header), three local headers
  CHECK(reader.get("data/1").size == big.size());

  // A small archive is read once.
  MemorySink small_sink;
  ZipBlobWriter small(small_sink);
  small.add("data.pkl", "p", 1);
  small.add("data/0", "abcd", 4);
  small.finish();
  MemorySource small_memory(small_sink.buffer(), "small");
  CountingSource small_counting(small_memory);
  ZipBlobReader small_reader(small_counting);
  CHECK(small_counting.reads == 1);
  CHECK(small_counting.bytes == small_sink.buffer().size());
}

TEST_CASE("the zip writer rejects misuse", "[zip]") {
  MemorySink sink;
  CHECK_THROWS_AS(ZipBlobWriter(sink, ""), CheckpointError);
  CHECK_THROWS_AS(ZipBlobWriter(sink, "a/b"), CheckpointError);
  ZipBlobWriter writer(sink);
  writer.add("a", "x", 1);
  CHECK_THROWS_AS(writer.add("a", "y", 1), CheckpointError);
  CHECK_THROWS_AS(writer.add("", "y", 1), CheckpointError);
  CHECK_THROWS_AS(writer.add("b", nullptr, 1), CheckpointError);
  writer.finish();
  CHECK_THROWS_AS(writer.add("c", "z", 1), CheckpointError);
  CHECK_THROWS_AS(writer.finish(), CheckpointError);
}

TEST_CASE("a flipped payload byte fails the CRC check naming the record", "[zip]") {
  const std::string file = read_file(dcpp::test::fixture("two_rank_sharded/__0_0.distcp"));
  std::string archive(split_archives(file).front());
  MemorySource clean_source(archive, "clean");
  const ZipRecordInfo storage = ZipBlobReader(clean_source).get("data/0");
  archive[storage.data_offset + 17] ^= 0x10;
  MemorySource source(archive, "file __0_0.distcp, key 'w'");
  ZipBlobReader reader(source);
  const ZipRecordInfo& r = reader.get("data/0");
  CHECK_NOTHROW(reader.read_string(r, /*verify_crc=*/false));
  try {
    reader.read_string(r, /*verify_crc=*/true);
    FAIL("no CRC error");
  } catch (const CheckpointError& e) {
    const std::string what = e.what();
    CHECK(what.find("data/0") != std::string::npos);
    CHECK(what.find("file __0_0.distcp, key 'w'") != std::string::npos);
    CHECK(what.find("corrupted") != std::string::npos);
  }
  CHECK_NOTHROW(reader.read_string(reader.get("data.pkl"), true));
}

TEST_CASE("the zip reader rejects what it does not support", "[zip]") {
  MemorySink sink;
  ZipBlobWriter writer(sink, "root");
  writer.add("a", "abc", 3);
  writer.add("b", "defg", 4);
  writer.finish();
  const std::string good = sink.buffer();
  const std::size_t central = good.find(std::string_view("PK\x01\x02", 4));
  REQUIRE(central != std::string::npos);
  const auto rejects = [](const std::string& bytes, const std::string& expected) {
    MemorySource source(bytes, "hostile");
    try {
      ZipBlobReader reader(source);
      FAIL("accepted");
    } catch (const CheckpointError& e) {
      INFO(e.what());
      CHECK(std::string(e.what()).find(expected) != std::string::npos);
      CHECK(std::string(e.what()).find("hostile") != std::string::npos);
    }
  };
  std::string deflated = good;
  deflated[central + 10] = 8;
  rejects(deflated, "method 8");
  std::string renamed = good;  // the second record's central name "root/b" -> "rooX/b"
  renamed[good.rfind("root/b") + 3] = 'X';
  rejects(renamed, "root folder");
  std::string duplicate = good;
  duplicate[good.rfind("root/b") + 5] = 'a';  // central says "root/a" again
  rejects(duplicate, "local header");
  std::string local_mismatch = good;
  local_mismatch[good.find("root/a") + 5] = 'z';
  rejects(local_mismatch, "local header");
  rejects(good.substr(0, good.size() - 1), "end of central directory");
  rejects(std::string(21, '\0'), "21 bytes");
}

TEST_CASE("duplicate record names are rejected", "[zip]") {
  // Two central entries for the same name, both pointing at a matching local header.
  MemorySink sink;
  ZipBlobWriter writer(sink, "r");
  writer.add("a", "1", 1);
  writer.add("b", "2", 1);
  writer.finish();
  std::string bytes = sink.buffer();
  // Point the second central entry at the first local header and rename it to "r/a".
  const std::size_t second = bytes.rfind(std::string_view("PK\x01\x02", 4));
  bytes[second + 46 + 2] = 'a';
  for (int i = 0; i < 4; ++i) {
    bytes[second + 42 + i] = 0;
  }
  MemorySource source(bytes, "dup");
  try {
    ZipBlobReader reader(source);
    FAIL("accepted");
  } catch (const CheckpointError& e) {
    CHECK(std::string(e.what()).find("twice") != std::string::npos);
  }
}

TEST_CASE("truncated zip archives never crash the reader", "[zip][hostile]") {
  const std::string file = read_file(dcpp::test::fixture("two_rank_sharded/__0_0.distcp"));
  const std::string archive(split_archives(file).front());
  std::size_t parsed = 0;
  for (std::size_t n = 0; n < archive.size(); ++n) {
    const std::string prefix = archive.substr(0, n);
    MemorySource source(prefix, "truncated");
    try {
      ZipBlobReader reader(source);
      check_consistent(reader, source);
      ++parsed;
    } catch (const CheckpointError&) {
    }
  }
  CHECK(parsed == 0);
}

TEST_CASE("random corruption of zip archives never crashes the reader", "[zip][hostile]") {
  const std::string file = read_file(dcpp::test::fixture("two_rank_sharded/__1_0.distcp"));
  const std::vector<std::string_view> parts = split_archives(file);
  std::mt19937_64 rng(20240611);
  std::size_t parsed = 0;
  std::size_t rejected = 0;
  for (int iteration = 0; iteration < 4000; ++iteration) {
    std::string bytes(parts[iteration % parts.size()]);
    const int edits = 1 + static_cast<int>(rng() % 3);
    for (int e = 0; e < edits; ++e) {
      const std::size_t at = rng() % bytes.size();
      switch (rng() % 3) {
        case 0:
          bytes[at] = static_cast<char>(bytes[at] ^ (1 + rng() % 255));
          break;
        case 1:  // saturate a field, as zip64 markers or huge lengths
          for (std::size_t i = at; i < std::min(bytes.size(), at + 1 + rng() % 8); ++i) {
            bytes[i] = static_cast<char>(0xFF);
          }
          break;
        default:
          bytes[at] = 0;
          break;
      }
    }
    MemorySource source(bytes, "corrupted");
    try {
      ZipBlobReader reader(source);
      check_consistent(reader, source);
      ++parsed;
    } catch (const CheckpointError&) {
      ++rejected;
    }
  }
  CHECK(rejected > 1000);
  CHECK(parsed > 100);  // payload flips parse and fail only their CRC check
}

// ---------------------------------------------------------------------------------------------
// zip64, without 4 GiB of memory: payloads are read-only anonymous mappings (the zero page), the
// sink keeps every byte but those, and the source gives zeros where they were.

class ZeroRegion {
 public:
  explicit ZeroRegion(std::size_t size) : size_(size) {
    data_ = mmap(nullptr, size, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    REQUIRE(data_ != MAP_FAILED);
  }
  ~ZeroRegion() { munmap(data_, size_); }
  const char* data() const { return static_cast<const char*>(data_); }
  std::size_t size() const { return size_; }

 private:
  void* data_;
  std::size_t size_;
};

struct Gap {
  uint64_t offset;
  uint64_t size;
};

/// Keeps the bytes it is given except those from `skip` (recorded as gaps of zeros).
class SparseSink final : public ByteSink {
 public:
  explicit SparseSink(const ZeroRegion& skip) : skip_(skip) {}
  void write(const void* data, std::size_t size) override {
    const char* p = static_cast<const char*>(data);
    if (size != 0 && p >= skip_.data() && p + size <= skip_.data() + skip_.size()) {
      if (!gaps_.empty() && gaps_.back().offset + gaps_.back().size == position_) {
        gaps_.back().size += size;
      } else {
        gaps_.push_back({position_, size});
      }
    } else {
      kept_.append(p, size);
    }
    position_ += size;
  }
  uint64_t position() const override { return position_; }
  const std::string& kept() const { return kept_; }
  const std::vector<Gap>& gaps() const { return gaps_; }

 private:
  const ZeroRegion& skip_;
  std::string kept_;
  std::vector<Gap> gaps_;
  uint64_t position_ = 0;
};

/// The archive as `kept` bytes with zero-filled `gaps` (sorted) in between.
class SparseSource final : public ByteSource {
 public:
  SparseSource(std::string kept, std::vector<Gap> gaps)
      : kept_(std::move(kept)), gaps_(std::move(gaps)) {
    size_ = kept_.size();
    for (const Gap& g : gaps_) {
      size_ += g.size;
    }
  }
  uint64_t size() const override { return size_; }
  std::string describe() const override { return "sparse zip64 archive"; }
  void read(uint64_t offset, void* dst, std::size_t n) const override {
    if (offset > size_ || n > size_ - offset) {
      throw CheckpointError(dcpp::ErrorKind::kCorrupt, "sparse read out of bounds");
    }
    char* out = static_cast<char*>(dst);
    uint64_t kept_before = 0;  // kept bytes before `pos`
    uint64_t pos = 0;          // archive offset where the current kept segment starts
    for (std::size_t g = 0; g <= gaps_.size() && n != 0; ++g) {
      const uint64_t kept_end = g < gaps_.size() ? gaps_[g].offset : size_;
      // The kept segment [pos, kept_end), then the gap.
      if (offset < kept_end) {
        const uint64_t k = std::min<uint64_t>(n, kept_end - offset);
        std::memcpy(out, kept_.data() + kept_before + (offset - pos), k);
        out += k, offset += k, n -= k;
      }
      kept_before += kept_end - pos;
      if (g < gaps_.size()) {
        const uint64_t gap_end = gaps_[g].offset + gaps_[g].size;
        if (n != 0 && offset < gap_end) {
          const uint64_t k = std::min<uint64_t>(n, gap_end - offset);
          std::memset(out, 0, k);
          out += k, offset += k, n -= k;
        }
        pos = gap_end;
      }
    }
  }

 private:
  std::string kept_;
  std::vector<Gap> gaps_;
  uint64_t size_;
};

TEST_CASE("records and offsets past 4 GiB use zip64 as miniz does", "[zip][zip64]") {
  constexpr uint64_t kBig = (uint64_t{1} << 32) + 100;
  ZeroRegion zeros(kBig + 7);
  SparseSink sink(zeros);
  ZipBlobWriter writer(sink, "archive");
  writer.add("data.pkl", "pickle", 6);
  writer.add("data/0", zeros.data(), kBig);      // size needs zip64
  writer.add("data/1", zeros.data(), kBig + 7);  // size and offset need zip64
  writer.add("version", "3\n", 2);               // offset needs zip64
  writer.add("empty", "", 0);                    // offset needs zip64, no data descriptor
  const uint64_t total = writer.finish();
  REQUIRE(sink.position() == total);
  REQUIRE(sink.gaps().size() == 2);  // the payloads went to the sink straight from memory

  SparseSource source(sink.kept(), sink.gaps());
  ZipBlobReader reader(source);
  REQUIRE(reader.records().size() == 5);
  const ZipRecordInfo& d0 = reader.get("data/0");
  const ZipRecordInfo& d1 = reader.get("data/1");
  CHECK(d0.size == kBig);
  CHECK(d0.crc32 == 0xA92A4CE5u);  // zlib.crc32 of kBig zero bytes
  CHECK(d0.data_offset == sink.gaps()[0].offset);
  CHECK(d1.size == kBig + 7);
  CHECK(d1.data_offset == sink.gaps()[1].offset);
  for (const ZipRecordInfo& r : reader.records()) {
    CHECK(r.data_offset % 64 == 0);
  }
  CHECK(reader.read_string(reader.get("version"), true) == "3\n");
  CHECK(reader.read_string(reader.get("empty"), true).empty());
  char tail[8];
  reader.read_range(d1, d1.size - 8, tail, 8);
  CHECK(std::string(tail, 8) == std::string(8, '\0'));

  // The structures, as PyTorch 2.6 wrote them for the same layout (see zip64_ref.py in the
  // report): local zip64 extra of data/0 holds (size, 0); its data descriptor has 8-byte sizes;
  // the central entry of data/1 holds (size, size, offset).
  const std::string& kept = sink.kept();
  const std::size_t local0 = kept.find("archive/data/0") + 14;
  CHECK(kept.substr(local0, 20) ==
        bytes_of({1, 0, 16, 0, 100, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}));
  const std::size_t descriptor0 = sink.gaps()[0].offset;  // kept offset == archive offset here
  CHECK(kept.substr(descriptor0, 24) ==
        bytes_of({'P', 'K', 7, 8, 0xE5, 0x4C, 0x2A, 0xA9, 100, 0, 0, 0,
                  1,   0,   0, 0, 100,  0,    0,    0,    1,   0, 0, 0}));
  const std::size_t central1 = kept.rfind("archive/data/1") + 14;
  CHECK(le32(kept, central1 - 14 - 46 + 20) == 0xFFFFFFFFu);
  CHECK(le32(kept, central1 - 14 - 46 + 42) == 0xFFFFFFFFu);
  CHECK(kept.substr(central1, 4) == bytes_of({1, 0, 24, 0}));

  // A zip64 entry whose extra field is cut short is rejected.
  std::string cut = sink.kept();
  cut[central1 + 2] = 8;
  SparseSource cut_source(cut, sink.gaps());
  CHECK_THROWS_AS(ZipBlobReader(cut_source), CheckpointError);
}

// Compares the writer with a torch.save output of >4 GiB storages, recorded without its large
// payloads (zip64_ref.py: DCPP_ZIP64_REFERENCE=<dir> holding zip64_ref.bin and zip64_ref.gaps,
// the latter "offset size" lines).
TEST_CASE("zip64 bytes equal PyTorch's", "[.][zip64-reference]") {
  const char* dir = std::getenv("DCPP_ZIP64_REFERENCE");
  REQUIRE(dir != nullptr);
  const std::string kept = read_file(std::filesystem::path(dir) / "zip64_ref.bin");
  std::ifstream gap_file(std::filesystem::path(dir) / "zip64_ref.gaps");
  std::vector<Gap> gaps;
  uint64_t offset = 0, size = 0;
  while (gap_file >> offset >> size) {
    gaps.push_back({offset, size});
  }
  SparseSource source(kept, gaps);
  ZipBlobReader reader(source);
  uint64_t largest = 0;
  for (const ZipRecordInfo& r : reader.records()) {
    largest = std::max(largest, r.size);
  }
  ZeroRegion zeros(static_cast<std::size_t>(largest));
  SparseSink sink(zeros);
  ZipBlobWriter writer(sink, reader.root());
  for (const ZipRecordInfo& r : reader.records()) {
    if (r.size > (uint64_t{1} << 26)) {
      writer.add(r.name, zeros.data(), r.size);
    } else {
      const std::string payload = reader.read_string(r, true);
      writer.add(r.name, payload.data(), payload.size());
    }
  }
  CHECK(writer.finish() == source.size());
  CHECK(sink.kept() == kept);
  REQUIRE(sink.gaps().size() == gaps.size());
  for (std::size_t i = 0; i < gaps.size(); ++i) {
    CHECK(sink.gaps()[i].offset == gaps[i].offset);
    CHECK(sink.gaps()[i].size == gaps[i].size);
  }
}

}  // namespace
}  // namespace dcpp::detail

TEST_CASE("the folded CRC-32 equals libdeflate's at every length and start", "[zip]") {
  std::mt19937 random(7);
  std::vector<uint8_t> data(70000);
  for (auto& byte : data) {
    byte = static_cast<uint8_t>(random());
  }
  for (std::size_t length :
       {0, 1, 255, 256, 257, 319, 320, 511, 512, 513, 1000, 4096, 65536, 69999}) {
    for (std::size_t start : {0, 1, 3, 63}) {
      if (start + length > data.size()) {
        continue;
      }
      for (uint32_t initial : {0u, 0xFFFFFFFFu, 0x12345678u}) {
        INFO("length " << length << " start " << start << " initial " << initial);
        REQUIRE(dcpp::detail::crc32(initial, data.data() + start, length) ==
                dcpp::detail::crc32_libdeflate(initial, data.data() + start, length));
      }
    }
  }
}

TEST_CASE("crc32_copy copies every byte, nothing beside them, and returns their CRC-32", "[zip]") {
  std::mt19937 random(11);
  std::vector<uint8_t> data(70000);
  for (auto& byte : data) {
    byte = static_cast<uint8_t>(random());
  }
  constexpr std::size_t kGuard = 128;
  std::vector<uint8_t> out(data.size() + 2 * kGuard + 64);
  for (std::size_t length :
       {0, 1, 63, 255, 256, 257, 319, 320, 321, 511, 512, 513, 1000, 4096, 65536, 69000}) {
    for (std::size_t start : {0, 1, 63}) {
      for (std::size_t to_offset : {0, 1, 17, 64}) {  // the destination's alignment
        std::fill(out.begin(), out.end(), uint8_t{0xA5});
        uint8_t* to = out.data() + kGuard + to_offset;
        const uint32_t initial = 0x12345678u;
        INFO("length " << length << " start " << start << " destination +" << to_offset);
        REQUIRE(dcpp::detail::crc32_copy(initial, to, data.data() + start, length) ==
                dcpp::detail::crc32_libdeflate(initial, data.data() + start, length));
        REQUIRE(std::equal(to, to + length, data.data() + start));
        REQUIRE(std::all_of(out.data(), to, [](uint8_t b) { return b == 0xA5; }));
        REQUIRE(
            std::all_of(to + length, out.data() + out.size(), [](uint8_t b) { return b == 0xA5; }));
      }
    }
  }
}
