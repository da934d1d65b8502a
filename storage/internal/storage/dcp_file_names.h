#pragma once
// The names of DCP's files in a checkpoint, built and recognised here only:
//   .metadata                 the checkpoint's metadata (written last: the commit)
//   __<rank>_<tag><n>.distcp  data file n of a rank's plan; its prefix `__<rank>_<tag>` is the
//                             plan's storage_data (the tag tells a replacing save's files apart)
//   __<rank>.metadata         a rank's metadata, saved without collectives
//   __<rank>.checksums        dcpp's checksum file beside it (.checksums for the whole checkpoint)
//   .dcpp-save.lock           the lock of a save in progress (save_lock.h); removed when it ends,
//                             left by a holder that died; no reader looks at it
//   .dcpp-save.<rank>.lock    the same for rank r's save without collectives

#include <cstddef>
#include <optional>
#include <string>

namespace dcpp::detail {

inline constexpr const char* kMetadataFileName = ".metadata";
inline constexpr const char* kDataFileSuffix = ".distcp";

/// `__<rank>_<tag>`: the prefix of a rank's data files, the storage_data of its plan.
inline std::string data_file_prefix(int rank, const std::string& tag = {}) {
  return "__" + std::to_string(rank) + "_" + tag;
}

/// `<prefix><n>.distcp`.
inline std::string data_file_name(const std::string& prefix, std::size_t n) {
  return prefix + std::to_string(n) + kDataFileSuffix;
}

/// Whether `name` has a data file's form `__*.distcp`, directly in the checkpoint (no '/').
inline bool is_data_file_name(const std::string& name) {
  const std::size_t suffix = std::char_traits<char>::length(kDataFileSuffix);
  return name.size() > 2 + suffix && name.rfind("__", 0) == 0 &&
         name.find('/') == std::string::npos &&
         name.compare(name.size() - suffix, suffix, kDataFileSuffix) == 0;
}

/// The rank in `__<rank>_...` (a data file, or a prefix): nullopt for any other name.
inline std::optional<int> rank_of_data_file(const std::string& name) {
  if (name.rfind("__", 0) != 0) return std::nullopt;
  std::size_t end = 2;
  while (end < name.size() && name[end] >= '0' && name[end] <= '9') ++end;
  if (end == 2 || end > 11 || end >= name.size() || name[end] != '_') return std::nullopt;
  return std::stoi(name.substr(2, end - 2));
}

inline std::string rank_metadata_file_name(int rank) {
  return "__" + std::to_string(rank) + kMetadataFileName;
}

inline std::string rank_checksum_file_name(int rank) {
  return "__" + std::to_string(rank) + ".checksums";
}

inline constexpr const char* kSaveLockFileName = ".dcpp-save.lock";

inline std::string rank_save_lock_file_name(int rank) {
  return ".dcpp-save." + std::to_string(rank) + ".lock";
}

/// The rank r of a file named exactly `__<r>.metadata` (r in canonical decimal, at most 9
/// digits); nullopt for any other name (a `.tmp` file, `__01.metadata`).
inline std::optional<int> parse_rank_metadata_file_name(const std::string& name) {
  const std::string suffix = kMetadataFileName;
  if (name.size() <= 2 + suffix.size() || name.rfind("__", 0) != 0 ||
      name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0) {
    return std::nullopt;
  }
  const std::string digits = name.substr(2, name.size() - 2 - suffix.size());
  if (digits.size() > 9 || (digits != "0" && digits[0] == '0')) return std::nullopt;
  for (char c : digits) {
    if (c < '0' || c > '9') return std::nullopt;
  }
  return std::stoi(digits);
}

}  // namespace dcpp::detail
