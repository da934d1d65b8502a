#pragma once
// The coordinator's part of committing a save (save()'s step 4): every rank's write results and
// replica checksums in, `.metadata` out through the storage writer.

#include "checkpoint/replicated_items.h"

#include <dcpp/checkpoint/checkpointer.h>
#include <dcpp/format/metadata.h>
#include <dcpp/storage/storage_writer.h>

#include <string>
#include <vector>

namespace dcpp::detail {

/// A rank's message in save()'s "writing" step: where its items landed, and the checksums of
/// those other ranks hold too (replicated_items.h).
std::string encode_written_items(const std::vector<WriteResult>& results,
                                 const std::vector<uint32_t>& replica_checksums);

/// Commits on the coordinator: decodes every rank's message (indexed by rank), compares the
/// replicas' checksums when `replicated` is set (ReplicaCheck::kFail throws kUsage naming the
/// items; kWarn logs), then the writer's finish with `metadata` (the global plan's, without
/// storage_data) and returns it with every rank's storage_data added. Throws kCorrupt on a
/// malformed message.
Metadata commit_save(StorageWriter& writer, Metadata metadata,
                     const std::vector<std::string>& messages, const ReplicatedItems* replicated,
                     ReplicaCheck replica_check);

}  // namespace dcpp::detail
