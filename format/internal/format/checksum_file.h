#pragma once
// dcpp's checksum file, `.checksums` beside `.metadata`: the CRC-32 of `.metadata` and of every
// item's byte range, so that a damaged byte anywhere in a checkpoint dcpp wrote is found, including
// the bytes no zip CRC-32 covers (headers, padding, the directory) and `.metadata` itself. DCP's
// readers ignore files they do not know, so checkpoints keep loading in Python.
//
// Design note: the file is text, one record per line, fields separated by tabs, names
// percent-encoded (docs/format.md):
//   dcpp-checksums 1
//   metadata <size> <crc32> <item count, or "-" when unknown>
//   item <file> <offset> <length> <crc32> <key>          (item count lines)
//   [a second metadata line and its items: the checkpoint a replacing save replaces]
//   end <crc32 of every byte before this line>
// CRC-32s are 8 lowercase hex digits. A save writes `.checksums.tmp`, syncs it and renames it to
// `.checksums` before it writes `.metadata`: a `.metadata` that exists always has its entry. A save
// that replaces a checkpoint also keeps the replaced `.metadata`'s entry, so that the old
// checkpoint still verifies if the save dies before its rename of `.metadata`.
// A checkpoint saved without collectives has one such file per rank, `__<r>.checksums` beside
// `__<r>.metadata`, listing that rank's items (per_rank_metadata.h); it is written the same way.

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dcpp::detail {

constexpr const char* kChecksumFileName = ".checksums";
constexpr const char* kChecksumTempFileName = ".checksums.tmp";

struct ItemChecksum {
  std::string file;  // relative to the checkpoint directory
  uint64_t offset = 0;
  uint64_t length = 0;
  uint32_t crc32 = 0;
  std::string key;
};

/// The checksums of one save: its `.metadata` and, when known, every item it wrote.
struct SaveChecksums {
  uint64_t metadata_size = 0;
  uint32_t metadata_crc32 = 0;
  std::optional<std::vector<ItemChecksum>> items;
};

std::string encode_checksum_file(const std::vector<SaveChecksums>& saves);

/// The checksum file written a line at a time, for a save whose items are not held as
/// ItemChecksums (a coordinator's million): `save` for each entry, then `item` for each of its
/// items (as many as it said), then `finish`. `expected_bytes` is room made ahead (0: none).
class ChecksumFileEncoder {
 public:
  explicit ChecksumFileEncoder(std::size_t expected_bytes = 0);
  /// A save's `metadata` line; `items`: how many follow, or none (the items are unknown).
  void save(uint64_t metadata_size, uint32_t metadata_crc32, std::optional<uint64_t> items);
  void item(std::string_view file, uint64_t offset, uint64_t length, uint32_t crc32,
            std::string_view key);
  /// The whole file, its `end` line written. The encoder is spent afterwards.
  std::string finish();

  /// About what an item's line takes (its names unescaped), for `expected_bytes`.
  static std::size_t item_bytes(std::size_t file_size, std::size_t key_size) {
    return 5 + file_size + 1 + 20 + 1 + 20 + 1 + 8 + 1 + key_size + 1;
  }

 private:
  std::string out_;
};

/// Which item lines a decode keeps, by file (unescaped) and offset; the others are checked and
/// counted, not kept. Empty: every item is kept.
using ItemChecksumFilter = std::function<bool(std::string_view file, uint64_t offset)>;

/// Throws CheckpointError naming `path` when the bytes are not a well-formed checksum file or its
/// own CRC-32 differs (a damaged or truncated checksum file).
std::vector<SaveChecksums> decode_checksum_file(std::string_view bytes, const std::string& path,
                                                const ItemChecksumFilter& keep = {});

/// The entry of `saves` for a `.metadata` of these bytes, or nullptr.
const SaveChecksums* find_save(const std::vector<SaveChecksums>& saves,
                               std::string_view metadata_bytes);

/// The CheckpointError message for a `.metadata` at `metadata_path` that matches no entry of the
/// checksum file at `checksum_path`: it is damaged (and how: truncated, extended, or changed).
std::string metadata_mismatch_message(const std::vector<SaveChecksums>& saves,
                                      std::string_view metadata_bytes,
                                      const std::string& metadata_path,
                                      const std::string& checksum_path);

/// Checks the `.metadata` bytes of the checkpoint in `directory` against its checksum file.
/// Returns nullopt when there is no checksum file (a checkpoint written by PyTorch, or by a dcpp
/// without checksums); otherwise the matching save's checksums. Throws CheckpointError naming the
/// checksum file when it is damaged, and naming `.metadata` when it matches no entry.
std::optional<SaveChecksums> check_metadata_checksum(const std::filesystem::path& directory,
                                                     std::string_view metadata_bytes);
/// As above, keeping of the save's items only those `keep` accepts (a rank that reads a few of a
/// million items indexes those few).
std::optional<SaveChecksums> check_metadata_checksum(const std::filesystem::path& directory,
                                                     std::string_view metadata_bytes,
                                                     const ItemChecksumFilter& keep);
/// The same for a per-rank checkpoint's `metadata_name` (`__<r>.metadata`) and its checksum file
/// `checksum_name` (`__<r>.checksums`), both in `directory`.
std::optional<SaveChecksums> check_metadata_checksum(const std::filesystem::path& directory,
                                                     std::string_view metadata_bytes,
                                                     const std::string& metadata_name,
                                                     const std::string& checksum_name,
                                                     const ItemChecksumFilter& keep = {});

/// Item checksums by file and offset, for lookups while reading.
class ItemChecksumIndex {
 public:
  ItemChecksumIndex() = default;
  explicit ItemChecksumIndex(const std::vector<ItemChecksum>& items);
  /// The checksum of the item at `offset` of `file`, or nullptr.
  const ItemChecksum* find(const std::string& file, uint64_t offset) const;

 private:
  std::map<std::string, std::map<uint64_t, ItemChecksum>> by_file_;
};

/// The CheckpointError message for an item whose bytes have CRC-32 `actual`: names `where` (the
/// file and key), the byte range, both CRC-32s and what to do.
std::string item_mismatch_message(const std::string& where, const ItemChecksum& expected,
                                  uint32_t actual);

}  // namespace dcpp::detail
