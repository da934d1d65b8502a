#pragma once
// Per-rank checkpoints: what a save without collectives leaves (DCP's `use_collectives=False`, and
// dcpp's SaveOptions::use_collectives = false). Each rank r planned alone and wrote its data files
// `__<r>_<n>.distcp`, its metadata `__<r>.metadata` (a whole DCP Metadata of what r saved) and,
// when dcpp wrote it, its checksum file `__<r>.checksums`; there is no `.metadata`.
//
// Design note. DCP's own load reads only `__<r>.metadata` on rank r, so it can load such a
// checkpoint only on the same ranks with the same sharding. dcpp merges every rank's metadata into
// one Metadata view, which then loads like any checkpoint, resharded onto any number of ranks:
//   - ranks: the files must be `__0.metadata` .. `__<N-1>.metadata` without a gap; a gap is a
//     CheckpointError naming the missing file. A missing *trailing* rank cannot be told from a
//     smaller job: a load then fails only where it needs that rank's chunks (the load planner names
//     the key and the region no saved chunk covers).
//   - state_dict_metadata: the union, keys in the order of the lowest rank that has them. A key
//     several ranks saved must be the same kind (tensor or value) and, for a tensor, have the same
//     dtype, properties and global size. Chunks: the union; equal chunks (replicas) once; chunks at
//     the same offsets with other sizes, or that overlap without being equal, are an error.
//   - storage_data: the union; an item several ranks wrote (a replica, a value every rank saved)
//     is read from the lowest rank's file. MetadataIndex::index hints are recomputed to match the
//     merged chunk lists.
//   - planner_data: the union; a key's object path must agree across ranks.
//   - storage_meta and version: the lowest rank's.
// Every disagreement is a CheckpointError naming both metadata files and the key.
// When the directory has a `.metadata` too, `.metadata` wins (as in DCP) and this is not used.

#include <dcpp/format/metadata.h>

#include "format/checksum_file.h"
#include "storage/dcp_file_names.h"

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace dcpp::detail {

/// The ranks r with a file named exactly `__<r>.metadata` in `directory`, ascending (temporary
/// `__<r>.metadata.tmp` files and anything else are ignored). Empty when there is none or the
/// directory cannot be listed.
std::vector<int> find_rank_metadata_files(const std::filesystem::path& directory);

/// One rank's decoded metadata and the path it was read from (for messages).
struct RankMetadata {
  int rank = 0;
  std::string path;
  Metadata metadata;
};

/// Merges the ranks' metadata (ascending ranks, at least one) as the design note says. Pure: reads
/// no file. Throws CheckpointError naming both files and the key on any disagreement.
Metadata merge_rank_metadata(const std::vector<RankMetadata>& ranks);

/// Throws CheckpointError naming the first missing `__<r>.metadata` when `ranks` (ascending) are
/// not 0..N-1.
void check_rank_sequence(const std::filesystem::path& directory, const std::vector<int>& ranks);

/// What reading a per-rank checkpoint gives a reader.
struct PerRankCheckpoint {
  std::vector<RankMetadata> ranks;
  Metadata merged;
  /// Every rank's item checksums, when every rank has a checksum file that lists its items and
  /// `verify_checksums` was set; otherwise none (the format's own checks apply).
  std::optional<ItemChecksumIndex> checksums;
};

/// Reads every `__<r>.metadata` of `directory` (ranks as find_rank_metadata_files gives them,
/// checked by check_rank_sequence), each checked against its `__<r>.checksums` when
/// `verify_checksums` and the file exists, and merges them. Throws CheckpointError naming the file
/// on a damaged one; `ranks` must not be empty.
PerRankCheckpoint read_per_rank_checkpoint(const std::filesystem::path& directory,
                                           const std::vector<int>& ranks, bool verify_checksums);

}  // namespace dcpp::detail
