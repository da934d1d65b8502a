#include "rank_metadata.h"

#include <string>
#include <unordered_map>

namespace dcpp::detail {

Metadata rank_metadata(const SavePlan& plan, const std::vector<WriteResult>& results) {
  Metadata metadata;
  std::unordered_map<std::string, std::size_t> position;
  for (const WriteItem& item : plan.items) {
    const auto [at, added] = position.emplace(item.index.fqn, metadata.state_dict_metadata.size());
    if (added) {
      metadata.state_dict_metadata.emplace_back(
          item.index.fqn, item.is_tensor()
                              ? StorageMetadata(TensorStorageMetadata{
                                    item.tensor_data->properties, item.tensor_data->size, {}})
                              : StorageMetadata(BytesStorageMetadata{}));
    }
    if (auto* tensor =
            std::get_if<TensorStorageMetadata>(&metadata.state_dict_metadata[at->second].second);
        tensor != nullptr && item.tensor_data) {
      tensor->chunks.push_back(item.tensor_data->chunk);
    }
  }
  metadata.planner_data = plan.planner_data;
  for (const WriteResult& result : results) {
    metadata.storage_data.emplace_back(result.index, result.storage_data);
  }
  return metadata;
}

}  // namespace dcpp::detail
