#pragma once
// What a DCP data file's item must hold for the tensor chunk `.metadata` says it stores: checked
// by the file system and S3 readers (the drivers whose StorageInfo is a byte range of a data file)
// when they read `.metadata`, before anything is planned or allocated.

#include <dcpp/format/metadata.h>

#include <string>

namespace dcpp::detail {

/// Every tensor chunk stored as it is (no transform descriptor: not compressed) takes at least its
/// elements' bytes in its item, as torch.save's archive and a safetensors range do. Throws
/// CheckpointError (kCorrupt) naming `source` (the `.metadata` read), the key, the chunk and the
/// data file for a chunk that claims more than its item holds (a [2^40, 8] tensor over a few
/// hundred bytes: a damaged `.metadata`, which a load would otherwise try to allocate).
void check_item_lengths(const Metadata& metadata, const std::string& source);

}  // namespace dcpp::detail
