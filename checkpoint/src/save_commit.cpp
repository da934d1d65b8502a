// The coordinator's part of committing a save (save_commit.h).

#include "checkpoint/save_commit.h"

#include "core/logging.h"
#include "planner/plan_codec.h"

#include <dcpp/core/checkpoint_error.h>

namespace dcpp::detail {

std::string encode_written_items(const std::vector<WriteResult>& results,
                                 const std::vector<uint32_t>& replica_checksums) {
  return encode_strings({encode_write_results(results), encode_checksums(replica_checksums)});
}

Metadata commit_save(StorageWriter& writer, Metadata metadata,
                     const std::vector<std::string>& messages, const ReplicatedItems* replicated,
                     ReplicaCheck replica_check) {
  std::vector<std::vector<WriteResult>> all_results;
  std::vector<std::vector<uint32_t>> checksums;
  all_results.reserve(messages.size());
  checksums.reserve(messages.size());
  for (std::size_t rank = 0; rank < messages.size(); ++rank) {
    const std::vector<std::string> parts = decode_strings(messages[rank]);
    if (parts.size() != 2) {
      throw CheckpointError(ErrorKind::kCorrupt,
                            "checkpoint save: rank " + std::to_string(rank) +
                                "'s write results have " + std::to_string(parts.size()) +
                                " parts, not 2; every rank must run the same dcpp build");
    }
    all_results.push_back(decode_write_results(parts[0]));
    checksums.push_back(decode_checksums(parts[1]));
  }
  if (replicated != nullptr) {
    const std::string differing = describe_differing_replicas(*replicated, checksums);
    if (!differing.empty() && replica_check == ReplicaCheck::kFail) {
      throw CheckpointError(ErrorKind::kUsage, differing);
    }
    if (!differing.empty()) {
      logger().warn("{} (SaveOptions::replica_check is kWarn: committing anyway)", differing);
    }
  }
  writer.finish(metadata, all_results);
  std::size_t items = 0;
  for (const auto& rank_results : all_results) items += rank_results.size();
  metadata.storage_data.reserve(metadata.storage_data.size() + items);
  for (auto& rank_results : all_results) {
    for (WriteResult& result : rank_results) {
      metadata.storage_data.emplace_back(std::move(result.index), std::move(result.storage_data));
    }
  }
  return metadata;
}

}  // namespace dcpp::detail
