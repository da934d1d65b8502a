#include "dcp_item_lengths.h"

#include "core/shape_string.h"

#include <dcpp/core/checkpoint_error.h>

#include <c10/core/ScalarType.h>

#include <map>
#include <string_view>

namespace dcpp::detail {

void check_item_lengths(const Metadata& metadata, const std::string& source) {
  std::map<std::string_view, const TensorStorageMetadata*> tensors;
  for (const auto& [key, stored] : metadata.state_dict_metadata) {
    if (const auto* tensor = std::get_if<TensorStorageMetadata>(&stored)) tensors[key] = tensor;
  }
  for (const auto& [index, info] : metadata.storage_data) {
    if (!index.offset || !info.transform_descriptors.empty()) continue;
    const auto tensor = tensors.find(index.fqn);
    if (tensor == tensors.end()) continue;  // the reader's other checks say so
    for (const ChunkStorageMetadata& chunk : tensor->second->chunks) {
      if (chunk.offsets != *index.offset) continue;
      // No overflow: decode_metadata refuses a tensor whose bytes an int64 cannot count.
      int64_t bytes = static_cast<int64_t>(c10::elementSize(tensor->second->properties.dtype));
      for (const int64_t extent : chunk.sizes) bytes *= extent;
      if (info.length < bytes) {
        throw CheckpointError(
            ErrorKind::kCorrupt,
            source + ": key '" + index.fqn + "': the chunk at offsets " +
                shape_string(chunk.offsets) + " of sizes " + shape_string(chunk.sizes) + " (" +
                std::to_string(bytes) + " bytes of " +
                c10::toString(tensor->second->properties.dtype) + ") is stored in data file " +
                info.relative_path + " as an item of " + std::to_string(info.length) +
                " bytes: .metadata does not describe the data it was saved with (restore it, or "
                "load an earlier checkpoint)");
      }
      break;
    }
  }
}

}  // namespace dcpp::detail
