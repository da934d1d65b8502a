#pragma once
// Whether the saved chunks of a tensor tile it exactly: what `dcpp verify` checks and what the
// DCP source requires before it assembles a tensor.

#include <dcpp/format/metadata.h>

#include <cstdint>
#include <string>
#include <vector>

namespace dcpp::tools {

/// The problems with how `chunks` cover a tensor of `shape`, one sentence each (without the key):
/// a chunk of another rank or with negative sizes, a chunk reaching outside the tensor, two chunks
/// overlapping (the first pair found), elements no chunk covers. Empty when the chunks tile the
/// tensor exactly.
std::vector<std::string> chunk_coverage_problems(const std::vector<int64_t>& shape,
                                                 const std::vector<ChunkStorageMetadata>& chunks);

}  // namespace dcpp::tools
