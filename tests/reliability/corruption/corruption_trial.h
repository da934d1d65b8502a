#pragma once
// One trial of the corruption harness: which byte of which file is damaged, how, and whether an
// error names what it must.

#include "byte_regions.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace dcpp::corruption {

enum class FileKind { kData, kMetadata, kChecksumFile };
const char* file_kind_name(FileKind kind);

/// A file of the undamaged checkpoint, its bytes and what each byte is.
struct TargetFile {
  std::string name;  // relative to the checkpoint directory
  FileKind kind;
  std::string pristine;
  std::vector<Span> spans;  // cover [0, pristine.size())
};

enum class Damage { kFlip, kTruncate };
const char* damage_name(Damage damage);

/// One byte xor'ed with a non-zero mask, or the file cut to `offset` bytes.
struct Corruption {
  std::size_t file;  // index into the target files
  Damage damage;
  uint64_t offset;  // the flipped byte, or the new length
  uint8_t mask;     // flips only
};

/// Trial `trial` of a run seeded `seed`: a file drawn uniformly, then a flip or a truncation (even
/// odds) at a uniform offset of the file; `by_region`: at a uniform offset of a region drawn
/// uniformly among the file's regions (so that the few bytes of headers, padding and directories
/// get as many trials as the payloads). Depends only on (seed, trial, by_region), so one trial can
/// be replayed alone.
Corruption draw_corruption(uint64_t seed, uint64_t trial, const std::vector<TargetFile>& files,
                           bool by_region);

/// The file's bytes after the damage.
std::string damaged_bytes(const TargetFile& file, const Corruption& corruption);

/// What an error must name: the file, and for a byte of an item (for a truncation, the first item
/// past the new end) its key.
struct Expectation {
  std::string file;
  std::optional<std::string> key;
  Region region;
};
Expectation expectation_for(const TargetFile& file, const Corruption& corruption);

/// Whether a check found the damage (`detected`) and named the file and key (`named`).
struct Verdict {
  bool detected = false;
  bool named = false;
  std::string detail;  // what was reported (or why the verdict is negative)
};

/// `dcpp verify`'s report: some problem names the file and, when expected, the key.
Verdict judge_verify(const nlohmann::json& report, const Expectation& expected);

/// A load's outcome: `error` is the CheckpointError's message (none: the load succeeded, and
/// `data_intact` says whether what it loaded equals what was saved). The message must hold the
/// file's path in `directory` and, when expected, the key in quotes.
Verdict judge_load(const std::optional<std::string>& error, bool crashed, bool data_intact,
                   const std::filesystem::path& directory, const Expectation& expected);

}  // namespace dcpp::corruption
