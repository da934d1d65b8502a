#include "corruption_trial.h"

#include <iterator>
#include <map>

namespace dcpp::corruption {

namespace {

// SplitMix64: a fixed generator, so a seed means the same trials with any standard library.
class Random {
 public:
  explicit Random(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }
  /// Uniform in [0, n), n > 0 (the modulo bias is below 2^-40 for the sizes used here).
  uint64_t below(uint64_t n) { return next() % n; }

 private:
  uint64_t state_;
};

}  // namespace

const char* file_kind_name(FileKind kind) {
  switch (kind) {
    case FileKind::kData:
      return "data file";
    case FileKind::kMetadata:
      return ".metadata";
    case FileKind::kChecksumFile:
      return "checksum file";
  }
  return "?";
}

const char* damage_name(Damage damage) {
  return damage == Damage::kFlip ? "byte flip" : "truncation";
}

Corruption draw_corruption(uint64_t seed, uint64_t trial, const std::vector<TargetFile>& files,
                           bool by_region) {
  Random random(seed);
  random = Random(random.next() ^ (trial * 0xD1B54A32D192ED03ULL));
  Corruption c;
  c.file = static_cast<std::size_t>(random.below(files.size()));
  c.damage = random.below(2) == 0 ? Damage::kFlip : Damage::kTruncate;
  const TargetFile& file = files[c.file];
  c.offset = random.below(file.pristine.size());  // a byte of the file, or a shorter length
  c.mask = static_cast<uint8_t>(1 + random.below(255));
  if (by_region) {
    // The bytes of each region, in file order; then one region, and one of its bytes.
    std::map<Region, std::vector<const Span*>> regions;
    std::map<Region, uint64_t> sizes;
    for (const Span& span : file.spans) {
      regions[span.region].push_back(&span);
      sizes[span.region] += span.end - span.begin;
    }
    auto region = regions.begin();
    std::advance(region, static_cast<long>(random.below(regions.size())));
    uint64_t at = random.below(sizes[region->first]);
    for (const Span* span : region->second) {
      if (at < span->end - span->begin) {
        c.offset = span->begin + at;
        break;
      }
      at -= span->end - span->begin;
    }
  }
  return c;
}

std::string damaged_bytes(const TargetFile& file, const Corruption& corruption) {
  std::string bytes = file.pristine;
  if (corruption.damage == Damage::kFlip) {
    bytes[corruption.offset] = static_cast<char>(bytes[corruption.offset] ^ corruption.mask);
  } else {
    bytes.resize(corruption.offset);
  }
  return bytes;
}

Expectation expectation_for(const TargetFile& file, const Corruption& corruption) {
  // A truncation loses the byte at the new length first: its item is the first past the end.
  const Span& span = span_at(file.spans, corruption.offset);
  Expectation expected{file.name, std::nullopt, span.region};
  if (!span.key.empty()) expected.key = span.key;
  return expected;
}

Verdict judge_verify(const nlohmann::json& report, const Expectation& expected) {
  Verdict verdict;
  verdict.detected = report.value("ok", true) == false && !report["problems"].empty();
  if (!verdict.detected) {
    verdict.detail = "verify reported no problem";
    return verdict;
  }
  for (const nlohmann::json& p : report["problems"]) {
    const bool file = p["file"].is_string() && p["file"].get<std::string>() == expected.file;
    const bool key =
        !expected.key || (p["key"].is_string() && p["key"].get<std::string>() == *expected.key);
    if (file && key) {
      verdict.named = true;
      verdict.detail = p["problem"].get<std::string>();
      return verdict;
    }
  }
  verdict.detail =
      "no problem names it; first: " +
      report["problems"][0].dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return verdict;
}

Verdict judge_load(const std::optional<std::string>& error, bool crashed, bool data_intact,
                   const std::filesystem::path& directory, const Expectation& expected) {
  Verdict verdict;
  if (!error) {
    verdict.detail = data_intact ? "load succeeded (data intact)" : "load succeeded, data differs";
    return verdict;
  }
  verdict.detected = true;
  verdict.detail = *error;
  if (crashed) {
    verdict.detail = "not a CheckpointError: " + *error;
    return verdict;
  }
  const std::string path = (directory / expected.file).string();
  const bool file = error->find(path) != std::string::npos;
  const bool key = !expected.key || error->find("'" + *expected.key + "'") != std::string::npos;
  verdict.named = file && key;
  return verdict;
}

}  // namespace dcpp::corruption
