#pragma once
// Writing the items of DCP data files, wherever the files are kept: what the file system and S3
// writers share. A driver opens a data file (a ByteSink) and commits it; this lays the items out
// in it as DCP does and reports where each went.

#include "format/byte_io.h"
#include "format/checksum_file.h"
#include "storage/dcp_file_names.h"

#include <dcpp/planner/plan.h>
#include <dcpp/planner/save_planner.h>
#include <dcpp/storage/filesystem_writer.h>

#include <functional>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace dcpp::detail {

/// DCP's `_split_by_size_and_type`: the items of one rank's plan, in `bins` data files: bytes
/// items round-robin, then tensors from the largest, each into the file with the fewest bytes.
std::vector<std::vector<const WriteItem*>> split_by_size_and_type(
    int bins, const std::vector<WriteItem>& items);

/// DCP's data file names: each plan without `storage_data` gets the prefix `__<rank>_<tag>` of
/// its rank (plans[i] is rank i's); a prefix a subclass chose stays, as in DCP.
void assign_file_prefixes(std::vector<SavePlan>& plans, const std::string& tag);

/// A rank's data files and their items, as `options` cut them (one file per item, or per writer
/// thread), each written by `write_file(name, items)` on `options.thread_count` threads; returns
/// every item's WriteResult, file by file. Throws CheckpointError (kUsage) when the plan has no
/// file prefix (prepare_global_plan was not applied), or what a `write_file` threw.
std::vector<WriteResult> write_data_files(
    const SavePlan& plan, bool single_file_per_rank, int thread_count,
    const std::function<std::vector<WriteResult>(
        const std::string& name, const std::vector<const WriteItem*>& items)>& write_file);

/// Adds every rank's write results to `metadata.storage_data`; returns the data files they name.
/// For a writer that keeps the Metadata whole (a memory step); the file and S3 writers pickle the
/// results where they lie instead (encode_metadata_with_results).
std::set<std::string> add_write_results(Metadata& metadata,
                                        const std::vector<std::vector<WriteResult>>& results);

/// `.metadata`'s bytes: `metadata` with every rank's write results as further `storage_data`,
/// pickled where they lie (a million at 1,024 ranks: 216 MB of copies not made). The data files
/// they name are added to `referenced`.
std::string encode_metadata_with_results(const Metadata& metadata,
                                         const std::vector<std::vector<WriteResult>>& results,
                                         std::set<std::string>* referenced);

/// Writes `items` into data file `name` through `sink`, bytes items first, then tensors, as DCP
/// orders a file, each as a torch.save archive, in one zstd frame when `compression` says so.
/// Returns each item's WriteResult: its place in the file and the CRC-32 of its stored bytes.
std::vector<WriteResult> write_data_file(ByteSink& sink, const std::string& name,
                                         const std::vector<const WriteItem*>& items,
                                         SavePlanner& planner, Compression compression,
                                         int compression_level);

/// The checksum file of a save whose `.metadata` is `metadata_bytes` and whose ranks wrote
/// `results`: `.metadata`'s CRC-32, and every item's when every result has one (else the items
/// are unknown); then `replaced`'s entry, when the save replaces a checkpoint. Written from the
/// results as they are, no copy of them made.
std::string checksum_file_of(std::string_view metadata_bytes,
                             const std::vector<std::vector<WriteResult>>& results,
                             const std::optional<SaveChecksums>& replaced);

/// The entry a replacing save keeps for the checkpoint it replaces, so that the old `.metadata`
/// still matches the new checksum file until it is replaced: from the old `.metadata`'s bytes
/// and the old checksum file's (`checksum_name` in messages), when there was one. A damaged old
/// checksum file leaves the entry with `.metadata`'s checksum only (and a warning).
SaveChecksums replaced_save_checksums(std::string_view old_metadata,
                                      const std::optional<std::string>& old_checksum_file,
                                      const std::string& checksum_name);

}  // namespace dcpp::detail
