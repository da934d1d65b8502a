#include "planner/planner_helpers.h"

#include <dcpp/core/checkpoint_error.h>

#include <ATen/core/List.h>

#include <algorithm>

namespace dcpp::detail {

std::vector<LocalChunk> local_chunks(const StateValue& value) {
  if (value.is_tensor()) {
    return {LocalChunk{value.tensor(), std::vector<int64_t>(value.tensor().dim(), 0)}};
  }
  std::vector<LocalChunk> chunks;
  for (const Shard& shard : value.sharded_tensor().local_shards()) {
    chunks.push_back(LocalChunk{shard.tensor, shard.offsets});
  }
  return chunks;
}

std::vector<int64_t> global_shape(const StateValue& value) {
  return value.is_tensor() ? value.tensor().sizes().vec() : value.sharded_tensor().global_shape();
}

at::ScalarType value_dtype(const StateValue& value) {
  return value.is_tensor() ? value.tensor().scalar_type() : value.sharded_tensor().dtype();
}

std::vector<ReadItem> read_items_for_chunk(const std::string& fqn, const LocalChunk& dest,
                                           int64_t dest_index,
                                           const std::vector<ChunkStorageMetadata>& chunks,
                                           int64_t* covered_elements) {
  std::vector<ReadItem> items;
  const std::size_t dims = dest.offsets.size();
  *covered_elements = 0;
  for (std::size_t c = 0; c < chunks.size(); ++c) {
    const ChunkStorageMetadata& saved = chunks[c];
    if (saved.offsets.size() != dims || saved.sizes.size() != dims) {
      throw CheckpointError(ErrorKind::kCorrupt,
                            "key '" + fqn + "': saved chunk " + std::to_string(c) + " has " +
                                std::to_string(saved.offsets.size()) + " dimensions, the tensor " +
                                std::to_string(dims) +
                                "; the checkpoint's .metadata is inconsistent");
    }
    ReadItem item;
    item.type = LoadItemType::kTensor;
    int64_t volume = 1;
    for (std::size_t d = 0; d < dims; ++d) {
      const int64_t begin = std::max(dest.offsets[d], saved.offsets[d]);
      const int64_t end = std::min(dest.offsets[d] + dest.tensor.size(static_cast<int64_t>(d)),
                                   saved.offsets[d] + saved.sizes[d]);
      if (end <= begin) {
        volume = 0;
        break;
      }
      item.dest_offsets.push_back(begin - dest.offsets[d]);
      item.storage_offsets.push_back(begin - saved.offsets[d]);
      item.lengths.push_back(end - begin);
      volume *= end - begin;
    }
    if (volume == 0) {
      // An empty local chunk still reads the saved chunk of the same (empty) box: nothing is
      // copied, but the item is read, and so checked, like any other.
      if (dest.tensor.numel() != 0 || saved.offsets != dest.offsets ||
          saved.sizes != dest.tensor.sizes().vec()) {
        continue;
      }
      item.dest_offsets.assign(dims, 0);
      item.storage_offsets.assign(dims, 0);
      item.lengths = saved.sizes;
    }
    item.dest_index = MetadataIndex{fqn, dest.offsets, dest_index};
    item.storage_index = MetadataIndex{fqn, saved.offsets, static_cast<int64_t>(c)};
    *covered_elements += volume;
    items.push_back(std::move(item));
  }
  return items;
}

at::Tensor narrow_to_box(at::Tensor tensor, const std::vector<int64_t>& offsets,
                         const std::vector<int64_t>& lengths) {
  for (std::size_t d = 0; d < offsets.size(); ++d) {
    tensor = tensor.narrow(static_cast<int64_t>(d), offsets[d], lengths[d]);
  }
  return tensor;
}

c10::IValue to_saved_value(const StateValue& value) {
  switch (value.kind()) {
    case StateValue::Kind::kValue:
      return value.value();
    case StateValue::Kind::kList: {
      c10::impl::GenericList list(c10::AnyType::get());
      for (const StateValue& element : value.list()) {
        list.push_back(to_saved_value(element));
      }
      return list;
    }
    default:
      throw CheckpointError(ErrorKind::kUsage, std::string("a ") + value.kind_name() +
                                                   " cannot be saved as a bytes item");
  }
}

}  // namespace dcpp::detail
