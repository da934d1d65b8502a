#pragma once
// A memory step's payload (the layout in <dcpp/storage/memory_step.h>), decoded: what the writer
// and the reader of memory steps share.

#include <dcpp/format/metadata.h>

#include <string>
#include <string_view>

namespace dcpp::detail {

/// The data file name a rank's memory step gives its items: `__<rank>_memory`.
std::string memory_data_file(int rank);

/// A payload, decoded: views into its bytes (which must outlive it) and the decoded Metadata.
struct MemoryPayload {
  int rank = 0;
  int world_size = 0;
  std::string_view manifest;
  Metadata metadata;
  std::string_view data;
};

/// Decodes a payload; `where` (a region name) names it in errors. Throws CheckpointError
/// (kCorrupt) naming `where` when the preamble, the sizes or the metadata do not hold together.
MemoryPayload decode_memory_payload(std::string_view bytes, const std::string& where);

}  // namespace dcpp::detail
